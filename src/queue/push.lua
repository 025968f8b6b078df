-- Adds one task unless its id is known.
-- KEYS: known, tasks. ARGV: id, task line.
-- Returns 1 if added, 0 if the id was already known.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local entry = redis.call('XADD', KEYS[2], '*', 'id', ARGV[1], 'task', ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], entry)
return 1
