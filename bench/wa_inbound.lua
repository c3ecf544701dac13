-- wrk script: POST /channels/whatsapp/webhook, each request one signed
-- inbound message as Meta sends it (bench/guests.py). The bodies and their
-- X-Hub-Signature-256 are made beforehand (wrk's Lua has no HMAC), one per
-- line of BENCH_BODIES ("<hex signature>\t<body>"), every message new;
-- thread tid of T takes lines tid, tid + T, ..., each made into its whole
-- request at init (so the client spends its time sending, as the read
-- benchmark's static request does, not formatting). A thread that runs out of
-- lines asks for /bench-ran-out-of-messages instead (a 404), so a reused
-- message never passes for a new one. Every answer must be 200: wrk's
-- own count of answers not 2xx or 3xx (no Lua response(), as the read
-- benchmark's auth.lua has none) must be 0 (bench/guests.py fails on any;
-- the webhook answers no other 2xx), and the rate is the server's count of
-- 200s. With
-- BENCH_READY set, the last thread creates that file once its init is
-- done.
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local common = require "common" -- bench/common.lua

local file = common.env("wa_inbound.lua", "BENCH_BODIES")
local nthreads = tonumber(common.env("wa_inbound.lua", "BENCH_THREADS"))
local reqs, next_req = {}, 1

wrk.method = "POST"
wrk.path = "/channels/whatsapp/webhook"
wrk.headers["Content-Type"] = "application/json"

common.expect_status(200, {
  wrk_counts = true,
  init = function()
    local i = 0
    for line in io.lines(file) do
      i = i + 1
      if i % nthreads == tid - 1 then
        local tab = line:find("\t", 1, true)
        reqs[#reqs + 1] = wrk.format(nil, nil,
          {["X-Hub-Signature-256"] = "sha256=" .. line:sub(1, tab - 1),
           ["Content-Type"] = "application/json"}, line:sub(tab + 1))
      end
    end
    -- wrk inits its threads one after the other, each starting to send
    -- as soon as it is ready, and starts its clock after the last: the
    -- last one's mark tells bench/guests.py that every thread sends.
    local ready = os.getenv("BENCH_READY")
    if ready and tid == nthreads then
      local f = assert(io.open(ready, "w"))
      f:close()
    end
  end,
})

function request()
  n = n + 1
  local req = reqs[next_req]
  if not req then return wrk.format("GET", "/bench-ran-out-of-messages") end
  next_req = next_req + 1
  return req
end
