-- bench/common.lua: helpers shared by the wrk scripts (bench/decision.lua,
-- bench/pms_write.lua, bench/webhooks_post.lua). Not a wrk script itself:
-- each script puts its own directory on package.path and requires it:
--   local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
--   package.path = dir .. "/?.lua;" .. package.path
--   local common = require "common"
-- wrk loads a script once for setup() and done() and once per thread, each
-- time in a Lua state of its own, so every state has its own copy of this
-- module; the functions it defines for wrk are globals of that state.
local common = {}

-- common.env(script, name): the value of the environment variable NAME,
-- which must be set and not empty; otherwise "SCRIPT: NAME must be set" on
-- stderr and exit 2.
function common.env(script, name)
  local v = os.getenv(name)
  if v == nil or v == "" then
    io.stderr:write(script .. ": " .. name .. " must be set\n")
    os.exit(2)
  end
  return v
end

-- common.expect_status(status, opts): defines wrk's setup(), init(),
-- response() and done() for a script whose every answer must be STATUS.
-- Each thread gets tid (1, 2, ... in the order wrk sets them up) and the
-- globals n (0: the script's request() counts its requests in it), bad
-- (answers other than STATUS) and first_bad (the first such answer's
-- status and body, 300 bytes of it). opts, optional: opts.init(args) runs
-- at the end of init(); opts.done_lines() returns text that done() writes
-- right after the "bench-bad-status: N" line (the total over the threads)
-- and before "bench-first-bad: <status> <body>" (only when N > 0).
-- opts.wrk_counts: no response() at all (wrk then hands no answer to Lua,
-- which costs it a call and a table of headers an answer: as much CPU as
-- the read benchmark's whole request on two shared cores); the check is
-- wrk's own "Non-2xx or 3xx responses" count, which bench/nodes.py
-- wrk_result reads too, and done() prints no bench-bad-status line. For a
-- script whose server answers nothing else in 2xx but STATUS.
function common.expect_status(status, opts)
  opts = opts or {}
  local threads = {}

  function setup(thread)
    thread:set("tid", #threads + 1)
    threads[#threads + 1] = thread
  end

  function init(args)
    n, bad, first_bad = 0, 0, ""
    if opts.init then opts.init(args) end
  end

  if opts.wrk_counts then return end

  function response(got, headers, body)
    if got ~= status then
      bad = bad + 1
      if first_bad == "" then first_bad = got .. " " .. (body or ""):sub(1, 300) end
    end
  end

  function done(summary, latency, requests)
    local total, first = 0, ""
    for _, t in ipairs(threads) do
      total = total + t:get("bad")
      if first == "" then first = t:get("first_bad") end
    end
    io.write(string.format("bench-bad-status: %d\n", total))
    if opts.done_lines then io.write(opts.done_lines()) end
    if total > 0 then io.write("bench-first-bad: " .. first .. "\n") end
  end
end

return common
