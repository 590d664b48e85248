-- mixed.lua: one call for the limits of one identity that use different
-- algorithms (a login route's sliding log under a sliding-window tier).
-- Before this part, scripts.go puts
--     local redis = redis
-- (every part after it calls Redis through that local), stored_forms.lua,
-- and the function run_code(code, KEYS, ARGV), which runs the script of
-- algorithm code (a string: '1' sliding window, '2' sliding log, '3' GCRA,
-- '4' fixed window, '5' sliding buckets, '6' GCRA again for the leaky
-- bucket) on those KEYS and ARGV: every algorithm's script inline in its
-- branch, or (the controlled script's record path, control.lua) the
-- function of the table algorithms by that code.
--
-- This part runs the groups, all at one now and in one script, so that no
-- other request comes in between, and so that a denial by any group spends
-- nothing on any other (a group's script spends only when it admits):
--   1. The groups of the counters (sliding and fixed window) are spent
--      first, each under a journal (below) that can put back exactly what
--      it wrote. A counter's reply is the same for a spend as for a peek
--      (its counts before the request), so a spend that is undone has
--      answered as its peek would.
--   2. Then the other groups as before: every one but the last as a peek;
--      when they all admit, the last as a spend; when that admits too, the
--      others as spends.
--   3. On a denial in 1 or 2, the journal is played back (every spend of 1
--      undone), and every group that has not run yet runs as a peek.
-- The last group to run needs no journal: should it deny, it spent
-- nothing, and nothing runs after it. So a tier with a route runs each
-- group once: the tier's INCRBY, then the route's spend, as the two
-- scripts alone would; only the non-counter groups but the last of them
-- run twice. Every spend's answer is read: the request is admitted only
-- when every group's spend admitted. (A spend in 2 can deny after its peek
-- admitted only if two groups shared a key, which the caller refuses;
-- should it happen, the answer is a denial, and what the earlier spends
-- took stays spent: the stricter side.)
--
-- The journal: while a group of 1 runs, redis is a stand-in whose call and
-- pcall record, before a key is first written, how to put it back, then
-- run the command. INCRBY and DECRBY by n are put back by the opposite
-- (DEL when they made the key: a counter never stores 0, so a result of
-- n is a new key); any other write (the window-change SET, a scale's
-- import) first reads the key (GET, PEXPIRETIME: two calls, off the hot
-- path) to put it back with SET ... PXAT (commands the functions' access
-- string allows, unlike DUMP and RESTORE). A key already put back whole is
-- not recorded again. Reads (GET, TIME, PTTL and the like) pass through;
-- any other command is taken for a write of the key it names first (every
-- write of the counters, stored_forms.lua and control.lua names one key).
-- A key whose value is no string makes that GET fail: the script fails,
-- as the peek that ran first always did. A group that denies restored its
-- own keys: its part of the journal is dropped. stored_forms.lua's and
-- control.lua's writes go through the same local redis, so they are
-- journaled too.
--
-- KEYS      the keys of every group, group after group; one hash tag.
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[2]   g, the number of groups (one digit: a group is one
--           algorithm's); then per group: its algorithm's code, its number
--           of limits k, the number of arguments per limit a, then its k*a
--           limit arguments as its script takes them. Or the pair, two
--           groups of one limit of two arguments each: 'p' and the two
--           codes (the login path: 'p12'), then group 1's two limit
--           arguments, then group 2's.
-- ARGV[last] (optional, after the groups) now in microseconds; absent:
--           Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then the reply of every group's script,
-- group after group, each whole, flat in the one array }: a reply's length
-- is known from its algorithm and its number of limits (2 + k for the
-- counters, 2 + 4k for the others). allowed: every enforced limit of every
-- group admits the cost. When the request is denied, every group's reply
-- is one that spent nothing. (Flat: Redis pays for every array of a
-- reply, a nested one about a quarter of a redis.call.)
--
-- Complexity: that of every group's script, once more for every
-- non-counter group but the last on a spend; on a denial, the undo of the
-- counters' spends. One group, and the pair (the login path's shape),
-- take straight-line paths that make no table they do not hand on but,
-- for a spend of two groups, the journal.

local real = redis
local cost = ARGV[1]
-- The common counts and codes are recognised without a conversion, and
-- tables are made whole by a constructor where their size is known (one
-- grown slot by slot is rehashed at every power of two): in Redis a Lua
-- step costs about as much as a hundred machine instructions.
local g = ARGV[2]
-- The pair: two groups of one limit of two arguments each (a tier and a
-- route of any algorithm but GCRA, the login path's shape) come as
-- ARGV[2] = 'p' .. code1 .. code2, then the count and window of group 1,
-- then of group 2 (then now): six arguments where the general form takes
-- twelve, and Redis spends on every argument of a call about what ten Lua
-- steps cost.
local pair = #g == 3
if pair then g = 2 elseif g == '2' then g = 2 elseif g == '1' then g = 1 else g = g + 0 end

-- One group, spent or a peek, is its script's call, on KEYS itself.
if g == 1 then
  local k, a = ARGV[4], ARGV[5]
  if k == '1' then k = 1 else k = k + 0 end
  if a == '2' then a = 2 else a = a + 0 end
  local n = k * a
  local args
  if n == 2 then
    args = { cost, ARGV[6], ARGV[7], false }
  else
    args = { cost, unpack(ARGV, 6, 5 + n) }
  end
  local now = ARGV[6 + n]
  if now then
    now = now + 0
  else
    local t = real.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  args[n + 2] = now
  local r = run_code(ARGV[3], KEYS, args)
  return { r[1], now, unpack(r) }
end

local spend = cost == '1' or cost + 0 > 0

-- The journal: the stand-in for redis while a journaled group runs, and in
-- its array part four slots a step, played back last first: the command
-- ('DEL', 'DECRBY', 'INCRBY' or 'SET'), the key, then n, or the value and
-- its PEXPIRETIME (-1: none). A key with a DEL or SET step is put back
-- whole. It is made for a spend only: a peek writes nothing. undo plays it
-- back: every spend of the journaled groups put back.
local journal, steps, undo = nil, 0, nil
if spend then
  -- journaled runs a command (through f, real's call or pcall) for a
  -- journaled group, recording first how to put its key back.
  local function journaled(f, cmd, key, ...)
    local counter = cmd == 'INCRBY' or cmd == 'DECRBY'
    if not counter and (cmd == 'GET' or cmd == 'TIME' or cmd == 'PTTL' or cmd == 'PEXPIRETIME'
        or cmd == 'TTL' or cmd == 'EXISTS') then
      return f(cmd, key, ...)
    end
    for s = 2, steps, 4 do
      if journal[s] == key then
        local c = journal[s - 1]
        if c == 'DEL' or c == 'SET' then return f(cmd, key, ...) end
      end
    end
    if counter then
      local r = f(cmd, key, ...)
      if type(r) == 'number' then
        local n = ...
        local d
        if n == '1' then d = 1 else d = n + 0 end
        if cmd == 'DECRBY' then d = -d end
        if r == d then
          journal[steps + 1], journal[steps + 2] = 'DEL', key
        else
          journal[steps + 1], journal[steps + 2], journal[steps + 3] =
            cmd == 'INCRBY' and 'DECRBY' or 'INCRBY', key, n
        end
        steps = steps + 4
      end
      return r
    end
    local v = real.call('GET', key)
    if v then
      journal[steps + 1], journal[steps + 2], journal[steps + 3], journal[steps + 4] =
        'SET', key, v, real.call('PEXPIRETIME', key)
    else
      journal[steps + 1], journal[steps + 2] = 'DEL', key
    end
    steps = steps + 4
    return f(cmd, key, ...)
  end
  -- Its own metatable: what it does not define is real's. pcall records
  -- a counter's first write, its INCRBY, in line (the same step journaled
  -- would record): it is the journaled groups' hot path.
  journal = {
    false, false, false, false,
    call = function(...) return journaled(real.call, ...) end,
    pcall = function(cmd, key, ...)
      if steps == 0 and cmd == 'INCRBY' then
        local r = real.pcall(cmd, key, ...)
        if type(r) == 'number' then
          local n = ...
          if r == (n == '1' and 1 or n + 0) then
            journal[1], journal[2] = 'DEL', key
          else
            journal[1], journal[2], journal[3] = 'DECRBY', key, n
          end
          steps = 4
        end
        return r
      end
      return journaled(real.pcall, cmd, key, ...)
    end,
    __index = real,
  }
  setmetatable(journal, journal)
  undo = function()
    for s = steps - 3, 1, -4 do
      local cmd, key = journal[s], journal[s + 1]
      if cmd == 'DEL' then
        real.call('DEL', key)
      elseif cmd == 'SET' then
        local expiry = journal[s + 3]
        if expiry > 0 then
          real.call('SET', key, journal[s + 2], 'PXAT', expiry)
        else
          real.call('SET', key, journal[s + 2])
        end
      else
        real.call(cmd, key, journal[s + 2])
      end
    end
  end
end

-- The pair in straight lines: c, k, a the code, KEYS and ARGV of each
-- group, and no table but those the groups' scripts are handed (and, for
-- a spend, the journal, made above whether or not a counter needs it).
if pair then
  local c1, c2 = string.sub(ARGV[2], 2, 2), string.sub(ARGV[2], 3, 3)
  local now = ARGV[7]
  if now then
    now = now + 0
  else
    local t = real.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  local k1, a1 = { KEYS[1] }, { cost, ARGV[3], ARGV[4], now }
  local k2, a2 = { KEYS[2] }, { cost, ARGV[5], ARGV[6], now }
  local r1, r2, allowed = nil, nil, 1
  if not spend then
    r1, r2 = run_code(c1, k1, a1), run_code(c2, k2, a2)
    if r1[1] ~= 1 or r2[1] ~= 1 then allowed = 0 end
  elseif c1 == '1' or c1 == '4' or c2 == '1' or c2 == '4' then
    -- f, the counter spent first under the journal (group 1 when both
    -- are), then o, the other, spent last.
    local counter1 = c1 == '1' or c1 == '4'
    local cf, kf, af, co, ko, ao = c1, k1, a1, c2, k2, a2
    if not counter1 then cf, kf, af, co, ko, ao = c2, k2, a2, c1, k1, a1 end
    redis = journal
    local rf = run_code(cf, kf, af)
    redis = real
    local ro
    if rf[1] ~= 1 then
      -- It put back its own keys.
      allowed = 0
      ao[1] = '-' .. cost
      ro = run_code(co, ko, ao)
    else
      ro = run_code(co, ko, ao)
      if ro[1] ~= 1 then
        allowed = 0
        undo()
      end
    end
    if counter1 then r1, r2 = rf, ro else r1, r2 = ro, rf end
  else
    -- No counter: group 1 as a peek, then group 2 spent, then group 1.
    local peek = '-' .. cost
    a1[1] = peek
    r1 = run_code(c1, k1, a1)
    if r1[1] ~= 1 then
      allowed = 0
      a2[1] = peek
      r2 = run_code(c2, k2, a2)
    else
      r2 = run_code(c2, k2, a2)
      if r2[1] ~= 1 then
        allowed = 0
      else
        a1[1] = cost
        r1 = run_code(c1, k1, a1)
        if r1[1] ~= 1 then allowed = 0 end
      end
    end
  end
  if #r1 == 3 then return { allowed, now, r1[1], r1[2], r1[3], unpack(r2) } end
  local out = { allowed, now, unpack(r1) }
  local n = 2 + #r1
  for j = 1, #r2 do out[n + j] = r2[j] end
  return out
end

-- Any other shape goes through groups, three slots a group (code, KEYS,
-- ARGV, the last slot of ARGV now's).
local groups
if g == 2 then groups = { false, false, false, false, false, false } else groups = {} end
local at, first = 3, 1
for i = 1, 3 * g, 3 do
  local k, a = ARGV[at + 1], ARGV[at + 2]
  if k == '1' then k = 1 else k = k + 0 end
  if a == '2' then a = 2 else a = a + 0 end
  local n = k * a
  local keys, args
  if k == 1 then keys = { KEYS[first] } else keys = { unpack(KEYS, first, first + k - 1) } end
  if n == 2 then
    args = { cost, ARGV[at + 3], ARGV[at + 4], false }
  else
    args = { cost, unpack(ARGV, at + 3, at + 2 + n) }
    args[n + 2] = false
  end
  groups[i], groups[i + 1], groups[i + 2] = ARGV[at], keys, args
  first = first + k
  at = at + 3 + n
end
-- now goes to every group as a number: each script reads its now as
-- ARGV's now + 0, which is then arithmetic, not a conversion per group.
local now = ARGV[at]
if now then
  now = now + 0
else
  local t = real.call('TIME')
  now = t[1] * 1000000 + t[2]
end
for i = 3, 3 * g, 3 do
  local args = groups[i]
  args[#args] = now
end

if not spend then
  -- A peek: every group as one.
  local out, n, allowed = { 1, now }, 2, 1
  for i = 1, 3 * g, 3 do
    local r = run_code(groups[i], groups[i + 1], groups[i + 2])
    if r[1] ~= 1 then allowed = 0 end
    for j = 1, #r do out[n + j] = r[j] end
    n = n + #r
  end
  out[1] = allowed
  return out
end
-- reply[i] is group i's reply, false until it has run.
local reply = {}
for i = 1, g do reply[i] = false end
local allowed = 1
local function flat()
  local out, n = { allowed, now }, 2
  for i = 1, g do
    local r = reply[i]
    for j = 1, #r do out[n + j] = r[j] end
    n = n + #r
  end
  return out
end

-- last: the non-counter group spent last (the last in ARGV), 0 for none;
-- then group g, a counter, is spent last, with no journal.
local last = 0
for i = g, 1, -1 do
  local code = groups[3 * i - 2]
  if code ~= '1' and code ~= '4' then
    last = i
    break
  end
end

local denied = false
for i = 1, last == 0 and g - 1 or g do
  local code = groups[3 * i - 2]
  if code == '1' or code == '4' then
    local mark = steps
    redis = journal
    local r = run_code(code, groups[3 * i - 1], groups[3 * i])
    redis = real
    reply[i] = r
    if r[1] ~= 1 then
      -- It put back its own keys.
      steps = mark
      denied = true
      break
    end
  end
end

local peek = nil
if not denied and last == 0 then
  local r = run_code(groups[3 * g - 2], groups[3 * g - 1], groups[3 * g])
  reply[g] = r
  if r[1] == 1 then return flat() end
elseif not denied then
  -- The other non-counter groups, before last: peek them.
  for i = 1, last - 1 do
    local code = groups[3 * i - 2]
    if code ~= '1' and code ~= '4' then
      if not peek then peek = '-' .. cost end
      local args = groups[3 * i]
      args[1] = peek
      local r = run_code(code, groups[3 * i - 1], args)
      reply[i] = r
      if r[1] ~= 1 then denied = true end
    end
  end
  if not denied then
    local r = run_code(groups[3 * last - 2], groups[3 * last - 1], groups[3 * last])
    reply[last] = r
    if r[1] == 1 then
      for i = 1, last - 1 do
        local code = groups[3 * i - 2]
        if code ~= '1' and code ~= '4' then
          local args = groups[3 * i]
          args[1] = cost
          r = run_code(code, groups[3 * i - 1], args)
          reply[i] = r
          if r[1] ~= 1 then allowed = 0 end
        end
      end
      return flat()
    end
  end
end

-- Denied: every spend of the journaled groups put back, then every group
-- that has not run answers as a peek.
allowed = 0
undo()
if not peek then peek = '-' .. cost end
for i = 1, g do
  if not reply[i] then
    local args = groups[3 * i]
    args[1] = peek
    reply[i] = run_code(groups[3 * i - 2], groups[3 * i - 1], args)
  end
end
return flat()
