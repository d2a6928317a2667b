import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { fakeClock } from '../../../test/helpers/clock'
import { eventually } from '../../../test/helpers/eventually'
import { systemClock } from '../../shared/clock'
import {
  CREATION_LOOKUP_MS,
  checkConnectedAddress,
  checkTargetAtCreation,
  forbiddenAddress,
  guardedLookup,
  type ResolvedAddress,
  type Resolver,
  type TargetPolicy,
} from './target-guard'

const strict = { allowPrivateTargets: false }
const resolvingTo =
  (...addresses: string[]): Resolver =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
// The machine's clock: a name left to the system resolver may take its lookup's full bound.
const check = (url: string, policy: TargetPolicy) => checkTargetAtCreation(url, policy, systemClock)
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => 'accepted',
    (error: Error) => error.message,
  )

describe('forbiddenAddress', () => {
  test.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['fe80::1', 'link-local'],
    ['fd00:ec2::254', 'unique-local'],
    ['100.100.100.200', 'carrier-grade NAT'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.10', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.1.2.3', 'private'],
  ])('%s is refused as %s', (address, words) => {
    expect(forbiddenAddress(address)).toContain(words)
  })

  test.each(['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.4.4'])('%s is public', (address) => {
    expect(forbiddenAddress(address)).toBeUndefined()
  })

  // IPv6 forms that carry an IPv4 address, which a host's stack, a relay or a gateway may deliver
  // to: refused whatever IPv4 address they carry, public or not. Only IPv4-mapped (a v4 socket in
  // v6 notation) is judged as its IPv4 address.
  test.each([
    ['::127.0.0.1', 'IPv4-compatible'],
    ['::7f00:1', 'IPv4-compatible'],
    ['::8.8.8.8', 'IPv4-compatible'],
    ['0:0:0:0:0:0:8.8.8.8', 'IPv4-compatible'],
    ['::0.0.0.2', 'IPv4-compatible'],
    ['::ffff:0:7f00:1', 'IPv4-translated'],
    ['2002:7f00:1::', '6to4'],
    ['2002:808:808::1', '6to4'],
    ['64:ff9b::7f00:1', 'NAT64'],
    ['64:ff9b::8.8.8.8', 'NAT64'],
    ['64:ff9b:1::a00:1', 'NAT64'],
    ['2001::1', 'Teredo'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['fec0::1', 'site-local'],
    ['1::1', 'outside the global unicast range'],
    ['::1:0:0:1', 'outside the global unicast range'],
    ['4000::1', 'outside the global unicast range'],
  ])('%s is refused as %s', (address, words) => {
    expect(forbiddenAddress(address)).toContain(words)
  })

  const octets = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255))
  const hex = (parts: number[]) => [((parts[0]! << 8) | parts[1]!).toString(16), ((parts[2]! << 8) | parts[3]!).toString(16)]

  test('property: every IPv4 address, written in any IPv6 form that embeds it other than IPv4-mapped, is refused', () => {
    fc.assert(
      fc.property(octets, (parts) => {
        const [high, low] = hex(parts)
        const dotted = parts.join('.')
        for (const address of [
          `::${dotted}`,
          `::${high}:${low}`,
          `0:0:0:0:0:0:${dotted}`,
          `::ffff:0:${dotted}`,
          `2002:${high}:${low}::1`,
          `64:ff9b::${dotted}`,
          `64:ff9b::${high}:${low}`,
          `2001:0:${high}:${low}::1`,
        ]) {
          expect({ address, refused: forbiddenAddress(address) !== undefined }).toEqual({ address, refused: true })
        }
      }),
    )
  })

  test('property: an IPv4-mapped address is judged exactly as the IPv4 address it carries', () => {
    fc.assert(
      fc.property(octets, (parts) => {
        const [high, low] = hex(parts)
        const dotted = parts.join('.')
        const asIPv4 = forbiddenAddress(dotted) === undefined
        expect(forbiddenAddress(`::ffff:${dotted}`) === undefined).toBe(asIPv4)
        expect(forbiddenAddress(`::ffff:${high}:${low}`) === undefined).toBe(asIPv4)
      }),
    )
  })

  test('every IPv4 address in 10/8, 127/8, 169.254/16, 172.16/12 and 192.168/16 is refused, also IPv4-mapped', () => {
    const inRange = fc.oneof(
      fc.tuple(fc.constant(10), fc.nat(255), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(127), fc.nat(255), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(169), fc.constant(254), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(172), fc.integer({ min: 16, max: 31 }), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(192), fc.constant(168), fc.nat(255), fc.nat(255)),
    )
    fc.assert(
      fc.property(inRange, (parts) => {
        const address = parts.join('.')
        expect(forbiddenAddress(address)).toBeDefined()
        expect(forbiddenAddress(`::ffff:${address}`)).toBeDefined()
      }),
    )
  })
})

describe('checkTargetAtCreation', () => {
  test.each([
    ['ftp://example.com/hook', 'http or https'],
    ['file:///etc/passwd', 'http or https'],
    ['not a url', 'absolute'],
    ['https://user:pass@example.com/hook', 'credentials'],
    ['https://user@example.com/hook', 'credentials'],
    ['https://:pass@example.com/hook', 'credentials'],
    // Empty credentials: the URL parser drops them, so only the text shows them.
    ['http://:@93.184.215.14/', 'credentials'],
    ['http://@93.184.215.14/', 'credentials'],
    ['http:@93.184.215.14/', 'credentials'],
    ['http:\\\\:@93.184.215.14/', 'credentials'],
    [' http://:@93.184.215.14/', 'credentials'],
    ['http://:\t@93.184.215.14/', 'credentials'],
    ['https://example.com/hook#part', 'fragment'],
    [`https://example.com/${'a'.repeat(2100)}`, '2048'],
  ])('%s is refused whatever the operator allows', async (url, words) => {
    expect(await refusal(check(url, strict))).toContain(words)
    expect(await refusal(check(url, { allowPrivateTargets: true }))).toContain(words)
  })

  test.each([
    ['http://127.0.0.1:8080/hook', 'loopback'],
    ['http://[::1]/hook', 'loopback'],
    ['http://0x7f.1/hook', 'loopback'],
    ['http://2130706433/hook', 'loopback'],
    ['http://10.0.0.1/hook', 'private'],
    ['http://192.168.1.1/hook', 'private'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://[fe80::1]/hook', 'link-local'],
    ['http://[::ffff:169.254.169.254]/', 'link-local'],
    ['http://[::127.0.0.1]/', 'IPv4-compatible'],
    ['http://[::8.8.8.8]/', 'IPv4-compatible'],
    ['http://[2002:7f00:1::]/', '6to4'],
    ['http://[64:ff9b::a9fe:a9fe]/', 'NAT64'],
    ['http://[2001:0:7f00:1::]/', 'Teredo'],
  ])('a literal address: %s is refused', async (url, words) => {
    expect(await refusal(check(url, strict))).toContain(words)
  })

  test("an @ after the host (in the path, query or a name's resolution) is no userinfo", async () => {
    const resolve = resolvingTo('93.184.215.14')
    for (const url of ['https://hooks.example/a@b', 'https://hooks.example/?to=a@b', 'https://hooks.example\\x@y', 'http://93.184.215.14/@']) {
      expect({ url, outcome: await refusal(check(url, { ...strict, resolve })) }).toEqual({ url, outcome: 'accepted' })
    }
  })

  test('a name resolving to a loopback address (the real resolver, localhost) is refused', async () => {
    expect(await refusal(check('http://localhost:3000/hook', strict))).toContain('resolves to a loopback address')
  })

  test('a name is refused when any of its addresses is not public', async () => {
    const resolve = resolvingTo('93.184.215.14', '10.0.0.7')
    expect(await refusal(check('https://hooks.example/x', { ...strict, resolve }))).toContain('private address (10.0.0.7)')
    const metadata = resolvingTo('169.254.169.254')
    expect(await refusal(check('https://hooks.example/x', { ...strict, resolve: metadata }))).toContain('link-local')
  })

  test('a public name, or one that does not resolve yet, is accepted: the latter is judged at delivery', async () => {
    expect(await refusal(check('https://hooks.example/x', { ...strict, resolve: resolvingTo('93.184.215.14') }))).toBe('accepted')
    expect(await refusal(check('https://not-yet.invalid/x', strict))).toBe('accepted')
    const failing: Resolver = async () => {
      throw Object.assign(new Error('queryA ENOTFOUND'), { code: 'ENOTFOUND' })
    }
    expect(await refusal(check('https://hooks.example/x', { ...strict, resolve: failing }))).toBe('accepted')
  })

  test(`a lookup that takes longer than ${CREATION_LOOKUP_MS} ms is accepted at that bound (judged at delivery); an answer in time is judged`, async () => {
    const clock = fakeClock()
    const answers: ((addresses: ResolvedAddress[]) => void)[] = []
    const resolve: Resolver = () => new Promise((done) => answers.push(done))
    let outcome: string | undefined
    void refusal(checkTargetAtCreation('https://slow.example/x', { ...strict, resolve }, clock)).then((words) => (outcome = words))
    await eventually(() => clock.pending() > 0)
    await clock.advance(CREATION_LOOKUP_MS - 1)
    expect(outcome).toBeUndefined()
    await clock.advance(1)
    expect(outcome).toBe('accepted')
    // Answered just before the bound, a private address is still refused.
    const inTime = refusal(checkTargetAtCreation('https://slow.example/x', { ...strict, resolve }, clock))
    await clock.advance(CREATION_LOOKUP_MS - 1)
    answers[1]!([{ address: '10.0.0.7', family: 4 }])
    expect(await inTime).toContain('private address (10.0.0.7)')
    expect(clock.pending()).toBe(0)
  })

  test('the operator may allow private targets: then only the form is checked', async () => {
    expect(await refusal(check('http://127.0.0.1:8080/hook', { allowPrivateTargets: true }))).toBe('accepted')
    expect(await refusal(check('http://localhost/hook', { allowPrivateTargets: true }))).toBe('accepted')
  })
})

describe('at delivery', () => {
  const lookup = (policy: Parameters<typeof guardedLookup>[0], all = true) =>
    new Promise<unknown>((resolve, reject) => guardedLookup(policy)('hooks.example', { all }, (error, address) => (error ? reject(error) : resolve(address))))

  test('the lookup hands the connection only checked addresses, and refuses a name that now resolves privately (DNS rebinding)', async () => {
    expect(await lookup({ ...strict, resolve: resolvingTo('93.184.215.14') })).toEqual([{ address: '93.184.215.14', family: 4 }])
    expect(await lookup({ ...strict, resolve: resolvingTo('93.184.215.14') }, false)).toBe('93.184.215.14')
    expect(await refusal(lookup({ ...strict, resolve: resolvingTo('127.0.0.1') }))).toContain('loopback')
    expect(await refusal(lookup({ ...strict, resolve: resolvingTo() }))).toContain('no address')
    expect(await lookup({ allowPrivateTargets: true, resolve: resolvingTo('127.0.0.1') })).toEqual([{ address: '127.0.0.1', family: 4 }])
  })

  test('the connected address is the last word', () => {
    expect(() => checkConnectedAddress('93.184.215.14', strict)).not.toThrow()
    expect(() => checkConnectedAddress('::ffff:127.0.0.1', strict)).toThrow(/loopback/)
    expect(() => checkConnectedAddress(undefined, strict)).toThrow(/unknown/)
    expect(() => checkConnectedAddress('127.0.0.1', { allowPrivateTargets: true })).not.toThrow()
  })
})
