#!/usr/bin/env python3
"""Acts as the demo identity provider of `make run`: prints a signed SAML
2.0 assertion (base64url) for a user of a demo portfolio, ready for the
RFC 7522 grant on POST /oauth/token.

    scripts/demo-saml.py [--data-dir var] [--portfolio 0] [--roles r1,r2] USER_NAME

It uses the key the demo wrote to <data-dir>/demo-idp-key.pem and the
portfolio's SAML settings from demo-credentials.json, and signs with the
xmlsec1 command-line tool (as a real IdP would sign; see docs/scim.md)."""

import argparse
import base64
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "t", "api",
                                "lib"))
import idp  # noqa: E402  (the test IdP's assertion builder and signer)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("user_name")
    ap.add_argument("--data-dir", default="var")
    ap.add_argument("--portfolio", type=int, default=0, help="index in demo-credentials.json")
    ap.add_argument("--roles", default="", help="comma-separated roles for a new (JIT) user")
    ap.add_argument("--display-name")
    args = ap.parse_args()
    with open(os.path.join(args.data_dir, "demo-credentials.json")) as f:
        creds = json.load(f)
    saml = creds["portfolios"][args.portfolio]["saml"]
    keys = creds["demo_idp"]
    xml = idp.build_assertion(args.user_name, saml["idp_entity_id"], saml["audience"],
                              saml["recipient"],
                              roles=[r for r in args.roles.split(",") if r],
                              display_name=args.display_name)
    with tempfile.TemporaryDirectory() as tmp:
        signed = idp.sign_with(keys["private_key_file"], keys["certificate_file"], xml, tmp)
    print(base64.urlsafe_b64encode(signed).decode("ascii").rstrip("="))


if __name__ == "__main__":
    main()
