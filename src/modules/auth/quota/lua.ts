import { FIELD, LAPSED_LEASE, LEASE_FIELD_PREFIX } from './fields'
import { LEASE_LIFETIME_MS, LEASE_SHARE_DIVISOR, MIN_LEASE_UNITS } from './lease-policy'
import { FENCED } from './outcomes'
import { ADMITTED, MISSING, REFUSED, UNSEEDED, WAIT } from './status'

/**
 * The Redis side of the quota: every script that reads or writes a day hash. Statuses, field names
 * and lease bounds are interpolated from the TypeScript constants that read their answers.
 */

/** ARGV entries per charge in the charge script: cost, limit and key field. */
export const ARGS_PER_CHARGE = 3

/**
 * Part of the charge script: when a charge would be refused, the wait (ms) until the nearest live
 * lease of the account ends, or false when none is live. Lapsed leases are marked wholly used.
 */
const LEASE_WAIT_LUA = `
local function lease_wait(key)
  local fields = redis.call('HGETALL', key)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local wait = false
  for j = 1, #fields, 2 do
    if string.sub(fields[j], 1, ${LEASE_FIELD_PREFIX.length}) == '${LEASE_FIELD_PREFIX}' then
      local deadline = tonumber(fields[j + 1])
      if deadline >= 0 then
        if deadline <= now then
          redis.call('HSET', key, fields[j], ${LAPSED_LEASE})
        elseif not wait or deadline - now < wait then
          wait = deadline - now
        end
      end
    end
  end
  return wait
end
`

/** ARGV entries of the charge script before the charges: markers to delete, the marker's TTL. */
export const CHARGE_HEAD_ARGS = 2

// Atomic in Redis: N concurrent charges against quota Q admit exactly min(N, Q). One call carries
// a batch of charges (group-commit.ts). KEYS[1] is the call's marker (outcomes.ts): when it exists
// the call is fenced off or already ran, and nothing is done; else it records each charge's status
// (one digit each). KEYS[2..1+n] are markers of answered calls to delete (n = ARGV[1]); ARGV[2]
// the marker's TTL; then KEYS[2+n+i] is charge i's day hash and ARGV holds cost, limit and key
// field per charge. Each is checked and counted in order, as if alone, and the answer is a flat
// list of (status, value) pairs (status.ts): (ADMITTED, used), (REFUSED, used), (WAIT, ms) not
// judged yet because a live lease of the account may still hand units back (leases.ts): asked
// again after that wait; (MISSING, 0) not judged because the day hash is missing: Redis lost its
// data or the day has just begun, and counting from zero would hand out a fresh quota, so the node
// seeds it (SEED_LUA) and asks again. Status + UNSEEDED: the hash is provisional (seeded while the
// database was away), so the node seeds it again when it can. An admitted charge is two Redis
// calls: the increment (rolled back when over the limit) and the key's share. Only the seed
// creates the hash, so it alone sets the expiry.
export const CHARGE_BATCH_LUA = `${LEASE_WAIT_LUA}
if redis.call('EXISTS', KEYS[1]) == 1 then return {} end
local forget = tonumber(ARGV[1])
if forget > 0 then redis.call('DEL', unpack(KEYS, 2, 1 + forget)) end
local out = {}
local recorded = {}
for i = 2 + forget, #KEYS do
  local key = KEYS[i]
  local a = ${CHARGE_HEAD_ARGS} + (i - 2 - forget) * ${ARGS_PER_CHARGE}
  local state = redis.call('HMGET', key, '${FIELD.used}', '${FIELD.unseeded}')
  local status
  if not state[1] then
    status = ${MISSING}
    out[#out + 1] = status
    out[#out + 1] = 0
  else
    local flag = state[2] and ${UNSEEDED} or 0
    local cost = tonumber(ARGV[a + 1])
    local used = redis.call('HINCRBY', key, '${FIELD.used}', cost)
    if used <= tonumber(ARGV[a + 2]) then
      redis.call('HINCRBY', key, ARGV[a + 3], cost)
      status = ${ADMITTED}
      out[#out + 1] = status + flag
      out[#out + 1] = used
    else
      used = redis.call('HINCRBY', key, '${FIELD.used}', -cost)
      local wait = lease_wait(key)
      if wait then
        status = ${WAIT}
        out[#out + 1] = status + flag
        out[#out + 1] = wait
      else
        redis.call('HINCRBY', key, '${FIELD.rejected}', 1)
        status = ${REFUSED}
        out[#out + 1] = status + flag
        out[#out + 1] = used
      end
    end
  end
  recorded[#recorded + 1] = status
end
redis.call('SET', KEYS[1], table.concat(recorded), 'EX', ARGV[2])
return out
`

// KEYS[1] a write's marker; ARGV[1] its TTL. What the write recorded there, or, when it has not
// run, FENCED, stored so that it never runs (outcomes.ts). Asking again answers the same.
export const RESOLVE_WRITE_LUA = `
local outcome = redis.call('GET', KEYS[1])
if outcome then return outcome end
redis.call('SET', KEYS[1], '${FENCED}', 'EX', ARGV[1])
return '${FENCED}'
`

// KEYS[1] the day hash; ARGV: used, rejected, live refreshes, TTL, and 1 when complete or 0 when
// provisional. Creates the hash only if it is still missing, so concurrent seeds on any number of
// nodes apply once and never drop a charge counted in between. A complete seed of a provisional
// hash keeps the larger of each count: both are lower bounds of the day (the provisional hash
// counted from when it was made, the seed holds what was written before), and adding them would
// count twice whatever was written meanwhile. The TTL is relative (seconds to the end of the day
// by the service's clock), so a clock injected by tests cannot set an expiry already past for Redis.
export const SEED_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ARGV[5] == '0' or redis.call('HDEL', KEYS[1], '${FIELD.unseeded}') == 0 then return 0 end
  for j, field in ipairs({ '${FIELD.used}', '${FIELD.rejected}', '${FIELD.live}' }) do
    if tonumber(ARGV[j]) > tonumber(redis.call('HGET', KEYS[1], field) or '0') then redis.call('HSET', KEYS[1], field, ARGV[j]) end
  end
else
  redis.call('HSET', KEYS[1], '${FIELD.used}', ARGV[1])
  if ARGV[2] ~= '0' then redis.call('HSET', KEYS[1], '${FIELD.rejected}', ARGV[2]) end
  if ARGV[3] ~= '0' then redis.call('HSET', KEYS[1], '${FIELD.live}', ARGV[3]) end
  if ARGV[5] == '0' then redis.call('HSET', KEYS[1], '${FIELD.unseeded}', 1) end
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
`

// KEYS[1] marks the batch as applied; KEYS[2..] are the day hashes, ARGV[2] their increments.
// A missing hash is left missing: the counts were recorded for the database too, and the seed that
// recreates the hash takes them from there; creating it here would drop the rest of the day.
export const ADD_BATCH_LUA = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i, fields in ipairs(cjson.decode(ARGV[2])) do
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then
    for field, n in pairs(fields) do
      if n ~= 0 then redis.call('HINCRBY', KEYS[i + 1], field, n) end
    end
    redis.call('EXPIRE', KEYS[i + 1], ARGV[1])
  end
end
return 1
`

// The scripts below that count take, like the charge script, their marker (outcomes.ts) as
// KEYS[1] and its TTL as ARGV[1]: nothing is done when it exists; else what was counted is recorded
// in it (a status digit, or the units granted).

// KEYS[2] the day hash; ARGV[2] the live refresh limit. Answers (status, live refreshes) with the
// charge script's statuses: ADMITTED, REFUSED, MISSING (seed, then ask again), + UNSEEDED when the
// hash is provisional. The request that wants the refresh was charged first, so the hash is
// normally there.
export const CLAIM_LIVE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return { ${MISSING}, 0 } end
local state = redis.call('HMGET', KEYS[2], '${FIELD.used}', '${FIELD.unseeded}')
local status, live, flag = ${MISSING}, 0, 0
if state[1] then
  flag = state[2] and ${UNSEEDED} or 0
  live = redis.call('HINCRBY', KEYS[2], '${FIELD.live}', 1)
  if live <= tonumber(ARGV[2]) then
    status = ${ADMITTED}
  else
    status = ${REFUSED}
    live = redis.call('HINCRBY', KEYS[2], '${FIELD.live}', -1)
  end
end
redis.call('SET', KEYS[1], status, 'EX', ARGV[1])
return { status + flag, live }
`

// KEYS[2] the day hash. Never below zero, and never on a missing hash: one seeded since the claim
// took its counts from the database, where only refreshes that happened are recorded. Records and
// answers 1 when it handed one back, else 0.
export const REFUND_LIVE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local done = 0
if redis.call('EXISTS', KEYS[2]) == 1 and tonumber(redis.call('HGET', KEYS[2], '${FIELD.live}') or '0') > 0 then
  redis.call('HINCRBY', KEYS[2], '${FIELD.live}', -1)
  done = 1
end
redis.call('SET', KEYS[1], done, 'EX', ARGV[1])
return done
`

// KEYS[2] the day hash; ARGV: the units, the key's field. Only on an existing hash (see the redis
// store's `refund`). A quota lease of this node may hold the charge's units: they are in `used`
// already, and its hand-back adds its per-key counts, this one included, so taking them off here is
// exact. Records and answers 1 when it handed them back, else 0.
export const REFUND_CHARGE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local done = redis.call('EXISTS', KEYS[2])
if done == 1 then
  redis.call('HINCRBY', KEYS[2], '${FIELD.used}', -tonumber(ARGV[2]))
  redis.call('HINCRBY', KEYS[2], ARGV[3], -tonumber(ARGV[2]))
  redis.call('HINCRBY', KEYS[2], '${FIELD.rejected}', 1)
end
redis.call('SET', KEYS[1], done, 'EX', ARGV[1])
return done
`

// KEYS[2] the day hash; ARGV: units wanted, limit, lease id (the TTL is the marker's and the
// hash's). Grants at most a 1 / LEASE_SHARE_DIVISOR of what is left, and nothing under
// MIN_LEASE_UNITS; answers { units granted, used after } and records the units. Nothing on a hash
// not seeded (seeding.ts): a missing one (Redis lost it since the charge) would start from zero,
// and a provisional one may still be raised to what the database says.
export const GRANT_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return { 0, 0 } end
local state = redis.call('HMGET', KEYS[2], '${FIELD.used}', '${FIELD.unseeded}')
local units, used = 0, tonumber(state[1] or '0')
if state[1] and not state[2] then
  units = math.min(tonumber(ARGV[2]), math.floor((tonumber(ARGV[3]) - used) / ${LEASE_SHARE_DIVISOR}))
  if units < ${MIN_LEASE_UNITS} then
    units = 0
  else
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    used = redis.call('HINCRBY', KEYS[2], '${FIELD.used}', units)
    redis.call('HSET', KEYS[2], '${LEASE_FIELD_PREFIX}' .. ARGV[4], now + ${LEASE_LIFETIME_MS})
    redis.call('EXPIRE', KEYS[2], ARGV[1])
  end
end
redis.call('SET', KEYS[1], units, 'EX', ARGV[1])
return { units, state[1] and used or 0 }
`

// KEYS[1] the day hash; ARGV: lease id, unused units, TTL, 1 when the node never knew it held the
// lease (its grant's answer was lost) else 0, then (key field, units) pairs. Applies once: the
// lease field goes with it. A lapsed lease's units stay used (refusals already counted them so);
// its per-key counts are still added. A lease its node never knew of gives all its units back, lapsed
// or not: not one was admitted from it.
export const SETTLE_LUA = `
local field = '${LEASE_FIELD_PREFIX}' .. ARGV[1]
local deadline = redis.call('HGET', KEYS[1], field)
if not deadline then return 0 end
redis.call('HDEL', KEYS[1], field)
if (tonumber(deadline) >= 0 or ARGV[4] == '1') and ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[1], '${FIELD.used}', '-' .. ARGV[2]) end
for j = 5, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[j], ARGV[j + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
`
