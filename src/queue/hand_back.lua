-- Hands entries back: those the worker still owns become claimable at once (they are made to
-- look idle for a long time).
-- KEYS: tasks. ARGV: group, worker, idle (ms), then entries.
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #p == 1 and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
  end
end
return 0
