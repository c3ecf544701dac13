-- wrk script: POST /properties/{code}/rates straight at pms-sim (the
-- reference of bench/decisions.sh), the write revopsd makes for each
-- property of a decision: rotating over the property codes, every request
-- with its own idempotency key (thread id + per-thread counter). Every answer
-- must be a 200: done() prints "bench-bad-status: N".
-- Set by bench/decisions.sh:
--   BENCH_CODES            PMS property codes, comma-separated
--   BENCH_FROM, BENCH_TO   the dates written
--   BENCH_MIN, BENCH_SPAN  minor_units in [MIN, MIN + SPAN)
local function env(name)
  local v = os.getenv(name)
  if v == nil or v == "" then
    io.stderr:write("pms_write.lua: " .. name .. " must be set\n")
    os.exit(2)
  end
  return v
end

local paths = {}
for c in env("BENCH_CODES"):gmatch("[^,]+") do paths[#paths + 1] = "/properties/" .. c .. "/rates" end
local min_units, span = tonumber(env("BENCH_MIN")), tonumber(env("BENCH_SPAN"))
local head = '{"room_type_code":"DBL","from":"' .. env("BENCH_FROM") .. '","to":"' ..
  env("BENCH_TO") .. '","rate":{"currency":"PLN","minor_units":'

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  threads[#threads + 1] = thread
end

function init(args)
  n, bad, first_bad = 0, 0, ""
end

function request()
  n = n + 1
  local minor = min_units + (n * 7919 + tid * 104729) % span
  local body = head .. minor .. '},"idempotency_key":"bench-t' .. tid .. '-' .. n .. '"}'
  return wrk.format(nil, paths[n % #paths + 1], nil, body)
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
    if first_bad == "" then first_bad = status .. " " .. (body or ""):sub(1, 300) end
  end
end

function done(summary, latency, requests)
  local total, first = 0, ""
  for _, t in ipairs(threads) do
    total = total + t:get("bad")
    if first == "" then first = t:get("first_bad") end
  end
  io.write(string.format("bench-bad-status: %d\n", total))
  if total > 0 then io.write("bench-first-bad: " .. first .. "\n") end
end
