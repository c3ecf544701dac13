-- wrk script: the reference of bench/webhooks.sh. POSTs what a webhook
-- delivery looks like (a ~BENCH_BODY_BYTES-byte compact JSON body shaped
-- like a v2 delivery, and the delivery headers) to nginx's /hook/1 ..
-- /hook/BENCH_URLS in turn, so nginx parses the same kind of request the
-- engine sends. The requests are built once in init(), so wrk's own Lua
-- cost per request stays small (wrk runs with one thread on the same cores).
-- Every answer must be a 204: done() prints "bench-bad-status: N" with the
-- number that were not, and the first one's status and body.
-- Set by bench/webhooks.sh:
--   BENCH_URLS        number of hook paths to rotate over (32)
--   BENCH_BODY_BYTES  body size in bytes (500)
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local common = require "common" -- bench/common.lua
local urls = tonumber(os.getenv("BENCH_URLS") or "32") or 32
local body_bytes = tonumber(os.getenv("BENCH_BODY_BYTES") or "500") or 500

local head = '{"id":"evt_2Yq6wK0dJcT1mVb8xR4nLs","type":"sso.user.provisioned",' ..
  '"created_at":"2026-11-22T12:00:00.000Z","delivery_id":"dlv_7Hc2pQ9sFz3kWt5yN1aMe",' ..
  '"portfolio_id":"pf_4Rk8vB2nXq6jLw1sT9dPc","properties":[],' ..
  '"data":{"synthetic":true,"n":12345,"pad":"'
local tail = '"}}'
local pad = string.rep("x", math.max(0, body_bytes - #head - #tail))
local body = head .. pad .. tail

local headers = {
  ["Content-Type"] = "application/json",
  ["User-Agent"] = "revops-webhooks/1",
  ["X-Service-Signature"] = string.rep("5f", 32),
  ["X-Service-Event-Id"] = "evt_2Yq6wK0dJcT1mVb8xR4nLs",
  ["X-Service-Event-Type"] = "sso.user.provisioned",
  ["X-Service-Delivery-Id"] = "dlv_7Hc2pQ9sFz3kWt5yN1aMe",
  ["X-Service-Portfolio"] = "pf_4Rk8vB2nXq6jLw1sT9dPc",
  ["webhook-id"] = "dlv_7Hc2pQ9sFz3kWt5yN1aMe",
  ["webhook-timestamp"] = "1795000000",
  ["webhook-signature"] = "v1," .. string.rep("A", 43) .. "=",
}

local reqs = {}
common.expect_status(204, {
  init = function(args)
    for i = 1, urls do
      reqs[i] = wrk.format("POST", "/hook/" .. i, headers, body)
    end
  end,
  done_lines = function() return string.format("bench-body-bytes: %d\n", #body) end,
})

function request()
  n = n + 1
  return reqs[(n + tid) % urls + 1]
end
