import ipaddr from 'ipaddr.js'

/**
 * The address a request comes from, as the login and sign-up throttles count it
 * (docs/adr/0126-running-behind-a-load-balancer-and-an-orchestrator.md): the socket's peer, unless
 * the peer is a trusted proxy (TRUSTED_PROXIES); then the right-most X-Forwarded-For entry that is
 * not itself a trusted proxy, since every entry left of it was written by someone the proxies do not vouch for.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6

/** The socket's peer, as Bun's server reports it. */
export interface PeerSource {
  requestIP(request: Request): { address: string } | null
}

export type ClientAddress = (request: Request, server: PeerSource | null) => string

/** IPv4 in four decimal parts (never `127.1` or hex forms) or IPv6, an IPv4-mapped one read as its IPv4 address. */
function parseAddress(text: string): Address | undefined {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text)
  if (!ipaddr.IPv6.isValid(text)) return undefined
  const parsed = ipaddr.IPv6.parse(text)
  return parsed.isIPv4MappedAddress() ? parsed.toIPv4Address() : parsed
}

/** One X-Forwarded-For entry: an address, also as some proxies write it with a port (`1.2.3.4:80`, `[::1]:80`) or in brackets. */
function forwardedEntry(entry: string): Address | undefined {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(entry)
  if (bracketed) return parseAddress(bracketed[1]!)
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(entry)
  return parseAddress(withPort ? withPort[1]! : entry)
}

/**
 * TRUSTED_PROXIES read: each comma-separated entry an address (one host) or a CIDR range, returned
 * as ranges in CIDR form; `invalid` says what is wrong with each entry that is not one.
 */
export function parseTrustedProxies(text: string): { ranges: string[]; invalid: string[] } {
  const ranges: string[] = []
  const invalid: string[] = []
  for (const entry of text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')) {
    const [host = '', bits, ...rest] = entry.split('/')
    const address = parseAddress(host)
    const max = address?.kind() === 'ipv4' ? 32 : 128
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : Number.NaN
    if (!address || host.includes('%') || rest.length > 0 || !(prefix <= max)) {
      invalid.push(`"${entry}" is neither an IP address nor a CIDR range`)
    } else if (prefix === 0) {
      // Trusting every peer lets every client choose the address it is counted under.
      invalid.push(`"${entry}" would trust every address, so any client could choose its own`)
    } else {
      const network = networkOf(address, prefix)
      // A range written with host bits (10.0.0.1/8) is a typo for one address or for its network: not guessed.
      if (network !== address.toString()) invalid.push(`"${entry}" has bits set past its prefix: the range is ${network}/${prefix}`)
      else ranges.push(`${address.toString()}/${prefix}`)
    }
  }
  return { ranges, invalid }
}

function networkOf(address: Address, prefix: number): string {
  const cidr = `${address.toString()}/${prefix}`
  return (address.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(cidr) : ipaddr.IPv6.networkAddressFromCIDR(cidr)).toString()
}

/**
 * The client address given the socket's peer and the X-Forwarded-For header, for the trusted
 * proxies' ranges (as `parseTrustedProxies` returns them). Walking X-Forwarded-For from the right,
 * each trusted entry is one more proxy; the first untrusted one is the client. An entry that is no
 * address stops the walk at the proxy that wrote it: the request is counted under that proxy's
 * address, never under a text a client chose. Entries all trusted: the left-most. No header from a
 * trusted peer: the peer (a balancer's own check).
 */
export function clientAddressRule(trustedRanges: readonly string[]): (peer: string | undefined, forwardedFor: string | null) => string {
  const ranges = trustedRanges.map((range) => ipaddr.parseCIDR(range))
  const trusted = (address: Address) => ranges.some(([network, bits]) => network.kind() === address.kind() && address.match(network, bits))
  return (peerText, forwardedFor) => {
    if (peerText === undefined) return 'unknown'
    const peer = parseAddress(peerText)
    if (!peer) return peerText
    if (ranges.length === 0 || !trusted(peer)) return peer.toString()
    const entries = forwardedFor?.split(',') ?? []
    let hop = peer
    for (let index = entries.length - 1; index >= 0; index--) {
      const entry = forwardedEntry(entries[index]!.trim())
      if (!entry) return hop.toString()
      if (!trusted(entry)) return entry.toString()
      hop = entry
    }
    return hop.toString()
  }
}

/** `clientAddressRule` on a request Bun's server received. */
export function clientAddress(trustedRanges: readonly string[]): ClientAddress {
  const rule = clientAddressRule(trustedRanges)
  return (request, server) => rule(server?.requestIP(request)?.address, request.headers.get('x-forwarded-for'))
}
