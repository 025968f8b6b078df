-- Keeps one response and drops the oldest past the store's bounds, in one step.
-- KEYS: the record's key, ages (zset id -> made at), sizes (hash id -> bytes), bytes (the total).
-- ARGV: id, record, made at (Unix s), time to live (s), max total bytes, oldest kept (Unix s),
--       the prefix of record keys (a victim's key is prefix .. id).
-- Returns the records' total size after the write.
local id, record = ARGV[1], ARGV[2]
local created, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_bytes, oldest_kept, prefix = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local total = tonumber(redis.call('GET', KEYS[4]) or '0')
local replaced = redis.call('HGET', KEYS[3], id)
if replaced then total = total - tonumber(replaced) end
redis.call('SET', KEYS[1], record, 'EX', ttl)
redis.call('ZADD', KEYS[2], created, id)
redis.call('HSET', KEYS[3], id, string.len(record))
total = total + string.len(record)
-- The oldest first, while the total is over the bound or the oldest too old (its key may
-- have expired already: its size is still counted until it leaves the index here).
while true do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if #first == 0 then break end
  if total <= max_bytes and tonumber(first[2]) >= oldest_kept then break end
  local victim = first[1]
  total = total - tonumber(redis.call('HGET', KEYS[3], victim) or '0')
  redis.call('ZREM', KEYS[2], victim)
  redis.call('HDEL', KEYS[3], victim)
  redis.call('DEL', prefix .. victim)
end
if total < 0 then total = 0 end
redis.call('SET', KEYS[4], total)
return total
