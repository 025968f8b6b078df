-- Marks a worker as seen and resets the idle time of the entries it still owns.
-- KEYS: tasks, results, workers. ARGV: group, worker, now (ms), then entry, id pairs.
-- Returns the entries whose task already has a result (another worker finished it).
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
local settled = {}
for i = 4, #ARGV, 2 do
  local entry, id = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    table.insert(settled, entry)
  else
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], entry, entry, 1)
    if #p == 1 and p[1][2] == ARGV[2] then
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, entry, 'JUSTID')
    end
  end
end
return settled
