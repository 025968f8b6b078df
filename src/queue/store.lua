-- Stores a result unless one is stored, then settles the entry (acknowledged and deleted).
-- The id is also recorded as known, with this entry (unless it is known already): an entry
-- that did not come from a push (written into the stream by another client) is then counted
-- like a pushed one, so queued + running + done + failed still adds up.
-- KEYS: results, failed, tasks, known. ARGV: id, line, '1' if not ok, group, entry.
-- Returns 1 if this result was stored, 0 if another was stored first.
local won = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
if won == 1 and ARGV[3] == '1' then redis.call('SADD', KEYS[2], ARGV[1]) end
redis.call('HSETNX', KEYS[4], ARGV[1], ARGV[5])
redis.call('XACK', KEYS[3], ARGV[4], ARGV[5])
redis.call('XDEL', KEYS[3], ARGV[5])
return won
