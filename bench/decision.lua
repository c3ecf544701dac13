-- wrk script: POST /v2/rate-decisions, one governed 3-property publish per
-- request (bench/decisions.sh). No Idempotency-Key, so every request is a
-- new decision; minor_units varies per request (always within the ceiling).
-- Every answer must be a 201: done() prints "bench-bad-status: N" with the
-- number that were not, and the first one's status and body.
-- Set by bench/decisions.sh:
--   BENCH_TOKEN       OAuth access token (client credentials, rates:write)
--   BENCH_PORTFOLIO   portfolio id, sent as X-Service-Portfolio
--   BENCH_PROPERTIES  the property ids, comma-separated
--   BENCH_CEILING     brand ceiling id
--   BENCH_APPROVER    approver_saml_subject (a user with revenue-approver)
--   BENCH_FROM, BENCH_TO   date_range (YYYY-MM-DD)
--   BENCH_MIN, BENCH_SPAN  minor_units in [MIN, MIN + SPAN)
local function env(name)
  local v = os.getenv(name)
  if v == nil or v == "" then
    io.stderr:write("decision.lua: " .. name .. " must be set\n")
    os.exit(2)
  end
  return v
end

local token, portfolio = env("BENCH_TOKEN"), env("BENCH_PORTFOLIO")
local props = {}
for p in env("BENCH_PROPERTIES"):gmatch("[^,]+") do props[#props + 1] = '"' .. p .. '"' end
local min_units, span = tonumber(env("BENCH_MIN")), tonumber(env("BENCH_SPAN"))
-- Everything but minor_units, split around it.
local head = '{"properties":[' .. table.concat(props, ",") .. '],"room_type_code":"DBL",' ..
  '"date_range":{"from":"' .. env("BENCH_FROM") .. '","to":"' .. env("BENCH_TO") .. '"},' ..
  '"proposed_rate":{"currency":"PLN","minor_units":'
local tail = '},"governance":{"brand_ceiling_id":"' .. env("BENCH_CEILING") ..
  '","approver_saml_subject":"' .. env("BENCH_APPROVER") ..
  '","justification":"bench/decisions.sh load test"}}'

wrk.method = "POST"
wrk.path = "/v2/rate-decisions"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["X-Service-Portfolio"] = portfolio
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

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
  -- Spread over the range, different per thread.
  local minor = min_units + (n * 7919 + tid * 104729) % span
  return wrk.format(nil, nil, nil, head .. minor .. tail)
end

function response(status, headers, body)
  if status ~= 201 then
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
