import { lookup } from 'node:dns/promises'
import ipaddr from 'ipaddr.js'
import { type Clock, withTimeout } from '../../shared/clock'

/**
 * SSRF guard for webhook targets. A target must be http(s) without userinfo, and every address its
 * host stands for must be public: not loopback, private, link-local (where cloud metadata services
 * answer), unique-local, carrier-grade NAT, unspecified, multicast or reserved, nor an IPv6 form
 * that embeds an IPv4 address (other than IPv4-mapped, judged as that address). Checked at creation and
 * again at delivery, where the address the connection actually reached is checked too, so a name
 * that later resolves elsewhere (DNS rebinding) gets nowhere. WEBHOOK_ALLOW_PRIVATE_TARGETS lifts
 * the address rule, never the scheme rule.
 */

export interface ResolvedAddress {
  address: string
  family: number
}

/** Resolves a host name to every address it has; throws when it has none. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>

export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true })

export interface TargetPolicy {
  allowPrivateTargets: boolean
  /** The system resolver unless a test supplies another. */
  resolve?: Resolver
}

export class RefusedTarget extends Error {
  override name = 'RefusedTarget'
}

const MAX_URL_LENGTH = 2048
/** How long creation waits for DNS; a name not resolved in time is judged at delivery. */
export const CREATION_LOOKUP_MS = 2_000

const RANGE_WORDS: Record<string, string> = {
  loopback: 'a loopback',
  private: 'a private',
  linkLocal: 'a link-local (cloud metadata)',
  uniqueLocal: 'a unique-local',
  carrierGradeNat: 'a carrier-grade NAT',
  unspecified: 'an unspecified',
  multicast: 'a multicast',
  broadcast: 'a broadcast',
  reserved: 'a reserved',
  rfc6145: 'an IPv4-translated (embeds an IPv4 address)',
  rfc6052: 'a NAT64 (embeds an IPv4 address)',
  '6to4': 'a 6to4 (embeds an IPv4 address)',
  teredo: 'a Teredo (embeds an IPv4 address)',
  deprecatedSiteLocal: 'a deprecated site-local',
}

/** 2000::/3, the only IPv6 block IANA allocates for global unicast: everything else is reserved or special. */
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3')

/**
 * ipaddr.js reads `::a.b.c.d` as `::ffff:a.b.c.d` (IPv4-mapped); written `0::a.b.c.d` it is read
 * as what it is, an IPv4-compatible address (::/96).
 */
const parseAddress = (address: string) => ipaddr.parse(/^::[^:]*\.[^:]*$/.test(address) ? `0${address}` : address)

/** Why this address may not be a target (`a loopback address`), or undefined when it is public. */
export function forbiddenAddress(address: string): string | undefined {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address
  if (!ipaddr.isValid(bare)) return 'not an IP address'
  let parsed = parseAddress(bare)
  // ::ffff:10.0.0.1 is how an IPv4 socket's peer is written in IPv6: judge the IPv4 address it carries.
  if (parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress()) parsed = parsed.toIPv4Address()
  const range = parsed.range()
  if (range !== 'unicast') return `${RANGE_WORDS[range] ?? `a non-public (${range})`} address`
  if (parsed instanceof ipaddr.IPv4) return undefined
  // ::a.b.c.d (RFC 4291 deprecated it): some stacks and tunnels still deliver it to the IPv4 address it carries.
  if (parsed.parts.slice(0, 6).every((part) => part === 0)) return 'a deprecated IPv4-compatible address (embeds an IPv4 address)'
  if (!parsed.match(GLOBAL_UNICAST)) return 'a reserved address (outside the global unicast range 2000::/3)'
  return undefined
}

/** The URL's host name without IPv6 brackets (WHATWG URL has already normalised 0x7f.1 and the like to 127.0.0.1). */
const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1')

/**
 * Whether the URL's text has userinfo: an @ in its authority (after the scheme and its slashes or
 * backslashes, before the next one or ? or #). The parsed URL cannot say: it drops an empty `:@`.
 * Tabs and newlines are removed and leading spaces and controls trimmed first, as the URL parser does.
 */
function hasUserinfo(raw: string): boolean {
  const text = raw.replace(/[\t\n\r]/g, '').replace(/^[\x00-\x20]+/, '')
  return /^[a-z][a-z\d+.-]*:[\\/]*[^\\/?#]*@/i.test(text)
}

/** The scheme and form rules that hold whatever the operator allows: throws RefusedTarget. */
export function parseTarget(raw: string): URL {
  if (raw.length > MAX_URL_LENGTH) throw new RefusedTarget(`url must be at most ${MAX_URL_LENGTH} characters`)
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new RefusedTarget('url must be an absolute http:// or https:// URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RefusedTarget('url must use http or https')
  if (hasUserinfo(raw)) throw new RefusedTarget('url must not carry credentials (no user:password@, even empty); put a token in the path or query instead')
  if (url.hash) throw new RefusedTarget('url must not have a #fragment')
  return url
}

function refuseAddresses(host: string, addresses: ResolvedAddress[]) {
  for (const { address } of addresses) {
    const why = forbiddenAddress(address)
    if (why) throw new RefusedTarget(`url's host ${host} resolves to ${why} (${address}); webhook targets must be public`)
  }
}

/**
 * The creation check: the URL's form, then its host. A literal address must be public; a name
 * must resolve only to public addresses. A name that does not resolve (yet) is accepted: it is
 * judged at every delivery.
 */
export async function checkTargetAtCreation(raw: string, policy: TargetPolicy, clock: Clock): Promise<URL> {
  const url = parseTarget(raw)
  if (policy.allowPrivateTargets) return url
  const host = hostOf(url)
  if (checkLiteralHost(url, policy)) return url
  const resolve = policy.resolve ?? systemResolver
  const addresses = await withTimeout(clock, resolve(host), CREATION_LOOKUP_MS, () => new Error(`${host} not resolved in time`)).catch(() => [] as ResolvedAddress[])
  refuseAddresses(host, addresses)
  return url
}

/** Refuses a URL whose host is a non-public literal address; true when the host is a literal address. */
export function checkLiteralHost(url: URL, policy: TargetPolicy): boolean {
  const host = hostOf(url)
  if (!ipaddr.isValid(host)) return false
  const why = policy.allowPrivateTargets ? undefined : forbiddenAddress(host)
  if (why) throw new RefusedTarget(`url's host is ${why}; webhook targets must be public`)
  return true
}

type LookupCallback = (error: Error | null, address: string | ResolvedAddress[], family?: number) => void

/**
 * A `lookup` for node:http that resolves with the policy's resolver and refuses a name with any
 * non-public address, so the connection can only be made to an address that was checked.
 */
export function guardedLookup(policy: TargetPolicy) {
  const resolve = policy.resolve ?? systemResolver
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
    resolve(hostname)
      .then((addresses) => {
        if (!policy.allowPrivateTargets) refuseAddresses(hostname, addresses)
        if (addresses.length === 0) throw new Error(`${hostname} has no address`)
        if (options.all) callback(null, addresses)
        else callback(null, addresses[0]!.address, addresses[0]!.family)
      })
      .catch((error: Error) => callback(error, ''))
  }
}

/**
 * The check of the address a connection actually reached: the last word, whatever resolved it.
 * Throws RefusedTarget.
 */
export function checkConnectedAddress(address: string | undefined, policy: TargetPolicy) {
  if (policy.allowPrivateTargets) return
  const why = address === undefined ? 'an unknown address' : forbiddenAddress(address)
  if (why) throw new RefusedTarget(`the connection reached ${why} (${address}); webhook targets must be public`)
}
