"""--demo: seeded portfolios and demo-credentials.json, end to end."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import assert_error, assert_success  # noqa: E402

EXPECTED = {"Demo Hotels Enterprise": ("enterprise", 5, 2),
            "Demo Hotels Group": ("group", 3, 1)}
PORTFOLIO_KEYS = {"portfolio_id", "name", "plan", "client_id", "client_secret", "scim_token",
                  "properties", "brand_ceilings", "approver_saml_subject"}


class DemoTest(harness.ServerCase):
    SERVER_ARGS = ["--demo"]

    @classmethod
    def set_up_server(cls):
        cls.creds_path = os.path.join(cls.srv.data_dir, "demo-credentials.json")
        cls.creds = cls.read_creds()

    @classmethod
    def read_creds(cls):
        def complete():
            try:
                with open(cls.creds_path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        return harness.wait_until(complete, 5.0, interval=0.05, what="demo-credentials.json")

    def portfolio(self, name):
        found = [p for p in self.creds["portfolios"] if p["name"] == name]
        self.assertEqual(len(found), 1, name)
        return found[0]

    def get(self, p, path, token=None, portfolio=None):
        tok = token or self.srv.access_token(p["client_id"], p["client_secret"])
        return self.srv.request("GET", path, token=tok, portfolio=portfolio or p["portfolio_id"])

    def test_credentials_file_shape(self):
        c = self.creds
        self.assertTrue(c["base_url"].startswith("http://"), c["base_url"])
        self.assertFalse(c["base_url"].endswith("/"))
        self.assertEqual(c["token_url"], c["base_url"] + "/oauth/token")
        self.assertEqual(len(c["portfolios"]), 2)
        self.assertEqual({p["name"] for p in c["portfolios"]}, set(EXPECTED))
        for p in c["portfolios"]:
            plan, nprops, nbrands = EXPECTED[p["name"]]
            with self.subTest(portfolio=p["name"]):
                self.assertTrue(PORTFOLIO_KEYS <= set(p), set(p))
                self.assertEqual(p["plan"], plan)
                self.assertTrue(p["portfolio_id"].startswith("pf_"))
                self.assertTrue(p["client_id"].startswith("cli_"))
                for k in ("client_secret", "scim_token", "approver_saml_subject"):
                    self.assertIsInstance(p[k], str)
                    self.assertTrue(p[k], k)
                self.assertIn("@", p["approver_saml_subject"])
                self.assertEqual(len(p["properties"]), nprops)
                for prop in p["properties"]:
                    self.assertTrue({"id", "pms_property_code", "brand"} <= set(prop))
                    self.assertTrue(prop["id"].startswith("prop_"))
                    self.assertTrue(prop["pms_property_code"])
                brands = {prop["brand"] for prop in p["properties"]}
                self.assertEqual(len(brands), nbrands)
                self.assertTrue(p["brand_ceilings"])
                for bc in p["brand_ceilings"]:
                    self.assertTrue({"id", "brand", "currency", "max_minor_units"} <= set(bc))
                    self.assertTrue(bc["id"].startswith("bc_"))
                    self.assertEqual(bc["currency"], "PLN")
                    self.assertIsInstance(bc["max_minor_units"], int)
                    self.assertGreater(bc["max_minor_units"], 0)
                self.assertEqual({bc["brand"] for bc in p["brand_ceilings"]}, brands)
        ids = [p["portfolio_id"] for p in c["portfolios"]]
        self.assertNotEqual(ids[0], ids[1])
        codes = [x["pms_property_code"] for p in c["portfolios"] for x in p["properties"]]
        self.assertEqual(len(codes), len(set(codes)))

    def test_credentials_work_end_to_end(self):
        for p in self.creds["portfolios"]:
            with self.subTest(portfolio=p["name"]):
                r = self.srv.token(p["client_id"], p["client_secret"])
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.body["portfolio_id"], p["portfolio_id"])
                self.assertEqual(sorted(r.body["property_codes"]),
                                 sorted(x["pms_property_code"] for x in p["properties"]))
                tok = r.body["access_token"]
                data, meta = assert_success(self, self.get(
                    p, "/v2/portfolios/%s/properties" % p["portfolio_id"], token=tok))
                self.assertEqual(meta["portfolio_id"], p["portfolio_id"])
                self.assertEqual(
                    sorted((x["id"], x["pms_property_code"], x["brand"]) for x in data),
                    sorted((x["id"], x["pms_property_code"], x["brand"])
                           for x in p["properties"]))
                data, _ = assert_success(self, self.get(
                    p, "/v2/portfolios/%s" % p["portfolio_id"], token=tok))
                self.assertEqual(data["name"], p["name"])
                self.assertEqual(data["plan"], p["plan"])
                self.assertEqual({bc["id"] for bc in data["brand_ceilings"]},
                                 {bc["id"] for bc in p["brand_ceilings"]})
                for bc in data["brand_ceilings"]:
                    self.assertEqual(bc["room_type_codes"], [])  # all room types
                    self.assertIsNone(bc["valid_to"])  # no end

    def test_demo_idp_signs_a_working_assertion(self):
        # scripts/demo-saml.py acts as the demo IdP (README walk-through):
        # the approver logs in with SAML and gets a working user token.
        import subprocess
        p = self.portfolio("Demo Hotels Enterprise")
        self.assertEqual(set(p["saml"]), {"idp_entity_id", "audience", "recipient"})
        self.assertEqual(p["saml"]["recipient"], self.creds["token_url"])
        for f in self.creds["demo_idp"].values():
            self.assertTrue(os.path.exists(f), f)
        script = os.path.join(harness.ROOT, "scripts", "demo-saml.py")
        out = subprocess.run([sys.executable, script, "--data-dir", self.srv.data_dir,
                              p["approver_saml_subject"]], capture_output=True, text=True,
                             timeout=30, check=True).stdout.strip()
        r = self.srv.request("POST", "/oauth/token",
                             headers={"Content-Type": "application/x-www-form-urlencoded"},
                             body="grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3A"
                                  "saml2-bearer&assertion=" + out)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["portfolio_id"], p["portfolio_id"])
        got = self.srv.request("GET", "/v2/portfolios", token=r.body["access_token"],
                               portfolio=p["portfolio_id"])
        assert_success(self, got)

    def test_cross_portfolio_refused(self):
        ent = self.portfolio("Demo Hotels Enterprise")
        grp = self.portfolio("Demo Hotels Group")
        tok = self.srv.access_token(ent["client_id"], ent["client_secret"])
        for path in ("/v2/portfolios", "/v2/portfolios/%s" % grp["portfolio_id"],
                     "/v2/portfolios/%s/properties" % grp["portfolio_id"]):
            r = self.srv.request("GET", path, token=tok, portfolio=grp["portfolio_id"])
            assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.srv.request("GET", "/v2/portfolios/%s" % grp["portfolio_id"], token=tok,
                             portfolio=ent["portfolio_id"])
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_zz_restart_does_not_seed_again(self):
        before = self.creds
        self.srv.restart(["--demo"])
        after = self.read_creds()
        self.assertEqual(len(after["portfolios"]), 2)
        self.assertEqual(sorted(p["portfolio_id"] for p in after["portfolios"]),
                         sorted(p["portfolio_id"] for p in before["portfolios"]))
        # the old credentials still work, and nothing was added to the portfolios
        for p in before["portfolios"]:
            data, _ = assert_success(self, self.get(
                p, "/v2/portfolios/%s/properties" % p["portfolio_id"]))
            self.assertEqual(sorted(x["id"] for x in data),
                             sorted(x["id"] for x in p["properties"]))
            data, _ = assert_success(self, self.get(p, "/v2/portfolios"))
            self.assertEqual([x["id"] for x in data], [p["portfolio_id"]])


if __name__ == "__main__":
    harness.run_main()
