-- wrk script: POST /properties/{code}/rates straight at pms-sim (the
-- reference of bench/decisions.sh), the write revopsd makes for each
-- property of a decision: rotating over the property codes, every request
-- with its own idempotency key (thread id + per-thread counter). Every answer
-- must be a 200: done() prints "bench-bad-status: N".
-- Set by bench/decisions.sh:
--   BENCH_CODES            PMS property codes, comma-separated
--   BENCH_FROM, BENCH_TO   the dates written
--   BENCH_MIN, BENCH_SPAN  minor_units in [MIN, MIN + SPAN)
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local common = require "common" -- bench/common.lua
local function env(name) return common.env("pms_write.lua", name) end

local paths = {}
for c in env("BENCH_CODES"):gmatch("[^,]+") do paths[#paths + 1] = "/properties/" .. c .. "/rates" end
local min_units, span = tonumber(env("BENCH_MIN")), tonumber(env("BENCH_SPAN"))
local head = '{"room_type_code":"DBL","from":"' .. env("BENCH_FROM") .. '","to":"' ..
  env("BENCH_TO") .. '","rate":{"currency":"PLN","minor_units":'

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

common.expect_status(200)

function request()
  n = n + 1
  local minor = min_units + (n * 7919 + tid * 104729) % span
  local body = head .. minor .. '},"idempotency_key":"bench-t' .. tid .. '-' .. n .. '"}'
  return wrk.format(nil, paths[n % #paths + 1], nil, body)
end
