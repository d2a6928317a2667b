import { describe, expect, test } from 'bun:test'
import { clientAddressRule, parseTrustedProxies } from './client-address'

// The rule on its own; test/flows/trusted-proxies.test.ts checks it over real HTTP, behind HAProxy too.

const ranges = (text: string) => parseTrustedProxies(text).ranges

describe('the client address', () => {
  const none = clientAddressRule([])
  const behindBalancer = clientAddressRule(ranges('10.0.0.2,172.20.0.0/16,2001:db8::/64'))

  test('trusting no proxy, the peer, whatever X-Forwarded-For says', () => {
    expect(none('198.51.100.7', '203.0.113.1')).toBe('198.51.100.7')
    expect(none('::ffff:198.51.100.7', null)).toBe('198.51.100.7')
    expect(none(undefined, '203.0.113.1')).toBe('unknown')
  })

  test('an untrusted peer is the client: its X-Forwarded-For is ignored', () => {
    expect(behindBalancer('198.51.100.7', '10.0.0.2')).toBe('198.51.100.7')
    expect(behindBalancer('10.0.0.3', '203.0.113.1')).toBe('10.0.0.3')
  })

  test('a trusted peer: the right-most entry that is not a trusted proxy', () => {
    expect(behindBalancer('10.0.0.2', '203.0.113.1')).toBe('203.0.113.1')
    // The client sent its own X-Forwarded-For: the balancer appended the real address after it.
    expect(behindBalancer('10.0.0.2', '192.0.2.66, 203.0.113.1')).toBe('203.0.113.1')
    // Several trusted hops (a TLS proxy, then the balancer), the mapped peer read as IPv4.
    expect(behindBalancer('::ffff:10.0.0.2', '192.0.2.66,203.0.113.1 , 172.20.4.5')).toBe('203.0.113.1')
    expect(behindBalancer('2001:db8::9', '2001:db8:1::5, 2001:db8::1')).toBe('2001:db8:1::5')
    // Header lines joined by the server (", ") read as one list.
    expect(behindBalancer('10.0.0.2', '192.0.2.66, 203.0.113.1, 172.20.0.9')).toBe('203.0.113.1')
  })

  test('ports and brackets some proxies write are read; the address is written plainly', () => {
    expect(behindBalancer('10.0.0.2', '203.0.113.1:51234')).toBe('203.0.113.1')
    expect(behindBalancer('10.0.0.2', '[2001:db8:2::1]:443')).toBe('2001:db8:2::1')
    expect(behindBalancer('10.0.0.2', '[2001:db8:2::1]')).toBe('2001:db8:2::1')
    expect(behindBalancer('10.0.0.2', '::FFFF:203.0.113.1')).toBe('203.0.113.1')
  })

  test('a malformed entry: the trusted hop that wrote it, never the text', () => {
    expect(behindBalancer('10.0.0.2', 'unknown')).toBe('10.0.0.2')
    expect(behindBalancer('10.0.0.2', '203.0.113.1, not-an-ip, 172.20.0.9')).toBe('172.20.0.9')
    expect(behindBalancer('10.0.0.2', '203.0.113.1,,')).toBe('10.0.0.2')
    expect(behindBalancer('10.0.0.2', '127.1')).toBe('10.0.0.2')
    expect(behindBalancer('10.0.0.2', '203.0.113.1:http')).toBe('10.0.0.2')
  })

  test('no header from a trusted peer is the peer; a chain of trusted proxies only, the left-most', () => {
    expect(behindBalancer('10.0.0.2', null)).toBe('10.0.0.2')
    expect(behindBalancer('10.0.0.2', '')).toBe('10.0.0.2')
    expect(behindBalancer('10.0.0.2', '172.20.1.1, 10.0.0.2')).toBe('172.20.1.1')
  })
})
