-- Removes one response and its place in the index.
-- KEYS: the record's key, ages, sizes, bytes (as put.lua's). ARGV: id.
local size = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if size then
  local total = tonumber(redis.call('GET', KEYS[4]) or '0') - tonumber(size)
  if total < 0 then total = 0 end
  redis.call('SET', KEYS[4], total)
end
return 1
