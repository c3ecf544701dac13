#!/usr/bin/env bash
# Printed by `make run` before the demo server starts.
port=${1:-8080}
cat <<TXT
revops demo: http://127.0.0.1:$port  (data in ./var, credentials in ./var/demo-credentials.json)
Try it in another terminal (jq comes with the Debian packages make installs):
  P=\$(jq -c '.portfolios[0]' var/demo-credentials.json); ID=\$(echo "\$P" | jq -r .portfolio_id)
  CID=\$(echo "\$P" | jq -r .client_id); SECRET=\$(echo "\$P" | jq -r .client_secret)
  TOKEN=\$(curl -s -u "\$CID:\$SECRET" -d grant_type=client_credentials http://127.0.0.1:$port/oauth/token | jq -r .access_token)
  curl -s -H "Authorization: Bearer \$TOKEN" -H "X-Service-Portfolio: \$ID" http://127.0.0.1:$port/v2/portfolios/\$ID/properties | jq
More to try (and what each shows): README.md, "Walk-through with curl".
TXT
