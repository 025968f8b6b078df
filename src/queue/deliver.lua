-- Hands entries to a worker and describes each, so that what leaves Redis is bounded: an entry
-- larger than the limit is described by its size only, never sent.
-- KEYS: tasks.
-- ARGV: group, worker, count, max entry bytes, then either 'new' (entries never delivered) or
--   'claim', min idle (ms), start (entries other workers left idle, from the cursor `start`).
-- Returns {next start ('0-0' when a sweep is done), {{entry, deliveries, id, task, bytes}, ...}}
-- where id and task are nil when the entry has none, and task is nil when bytes is over the
-- limit (id too, when it alone is over a 1 KiB).
local limit = tonumber(ARGV[4])
local reply, next_start, entries, deliveries = nil, '0-0', {}, {}
if ARGV[5] == 'new' then
  reply = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3],
    'STREAMS', KEYS[1], '>')
  if reply then entries = reply[1][2] end
else
  reply = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[6], ARGV[7],
    'COUNT', ARGV[3])
  next_start, entries = reply[1], reply[2]
end
local out = {}
for _, e in ipairs(entries) do
  local entry, fields = e[1], e[2]
  if not fields then
    -- Deleted while pending (Redis 6.2 still lists such entries): nothing to run or store.
    redis.call('XACK', KEYS[1], ARGV[1], entry)
  else
    local n = 1
    if ARGV[5] ~= 'new' then
      local p = redis.call('XPENDING', KEYS[1], ARGV[1], entry, entry, 1)
      if #p == 1 then n = p[1][4] end
    end
    local id, task, bytes = false, false, 0
    for i = 1, #fields, 2 do
      bytes = bytes + #fields[i] + #fields[i + 1]
      if fields[i] == 'id' then id = fields[i + 1] end
      if fields[i] == 'task' then task = fields[i + 1] end
    end
    if bytes > limit then
      task = false
      if id and #id > 1024 then id = false end
    end
    table.insert(out, {entry, n, id, task, bytes})
  end
end
return {next_start, out}
