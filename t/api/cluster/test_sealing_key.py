"""The sealing key held against its database (issue 19, defect 5): a
missing or wrong <data-dir>/revops.key beside an existing database makes
revopsd and revopsctl refuse to start, naming the key the database
expects and how to restore it, with nothing changed; a database restored
without its key is refused until the key is restored beside it; on
PostgreSQL a second node with a key of its own is refused. The right key
starts and opens what was sealed under it. Black-box: revopsd, revopsctl,
files and Meta's signed webhook call.
"""

import hashlib
import hmac
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402

LABEL = b"revops sealing key check v1"
APP_SECRET = "app-secret-sealed-under-the-key"
PNID = "106540352240001"


def check_value(key):
    return hmac.new(key, LABEL, hashlib.sha256).hexdigest()


def signed_call(srv):
    """A WhatsApp webhook call signed with APP_SECRET (which revopsd must
    unseal to check it) → its status."""
    raw = json.dumps({"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": [{
        "field": "messages", "value": {"messaging_product": "whatsapp",
                                       "metadata": {"phone_number_id": PNID},
                                       "statuses": []}}]}]})
    sig = hmac.new(APP_SECRET.encode(), raw.encode(), hashlib.sha256).hexdigest()
    return srv.request("POST", "/channels/whatsapp/webhook", body=raw,
                       headers={"Content-Type": "application/json",
                                "X-Hub-Signature-256": "sha256=" + sig}).status


class SealingKeyTest(unittest.TestCase):
    def setUp(self):
        self.srv = harness.Server()
        self.addCleanup(self.srv.cleanup)  # also when setUp fails below
        self.tmp = tempfile.mkdtemp(prefix="revops-key-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.key_path = os.path.join(self.srv.data_dir, "revops.key")
        with open(self.key_path, "rb") as f:
            self.key = f.read()
        self.seed = self.srv.seed_portfolio("enterprise", 1)
        self.srv.ctl("whatsapp", "set", "--portfolio", self.seed.id, "--property",
                     self.seed.properties[0]["id"], "--phone-number-id", PNID,
                     "--access-token", "tok", "--app-secret", APP_SECRET,
                     "--verify-token", "verify-token-1")
        self.assertEqual(signed_call(self.srv), 200)
        self.srv.stop()

    def refused(self, srv_or_args, *want_in_log):
        with self.assertRaises(RuntimeError) as cm:
            srv_or_args()
        log = str(cm.exception)
        self.assertIn("exited with 1 before listening", log)
        for w in want_in_log:
            self.assertIn(w, log)
        return log

    def restore_key(self, path):
        with open(path, "wb") as f:
            f.write(self.key)
        os.chmod(path, 0o600)

    def test_missing_key_is_refused_and_none_made(self):
        os.unlink(self.key_path)
        self.refused(self.srv.start, self.key_path, "is missing", check_value(self.key)[:16],
                     "Restore")
        self.assertFalse(os.path.exists(self.key_path), "a new key was made")
        # revopsctl, which seals too, refuses as well, and makes none
        p = self.srv.ctl_raw("whatsapp", "set", "--portfolio", self.seed.id, "--property",
                             self.seed.properties[0]["id"], "--phone-number-id", PNID,
                             "--access-token", "t", "--app-secret", "s", "--verify-token", "verify-token-2")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"is missing", p.stderr)
        self.assertFalse(os.path.exists(self.key_path), "revopsctl made a key")
        # restored: it starts and opens the secret sealed before
        self.restore_key(self.key_path)
        self.srv.start()
        self.assertEqual(signed_call(self.srv), 200)

    def test_wrong_key_is_refused_and_kept(self):
        other = os.urandom(32)
        with open(self.key_path, "wb") as f:
            f.write(other)
        self.refused(self.srv.start, self.key_path, "is not the key", check_value(self.key)[:16],
                     check_value(other)[:16])
        with open(self.key_path, "rb") as f:
            self.assertEqual(f.read(), other, "the key file was changed")
        self.restore_key(self.key_path)
        self.srv.start()
        self.assertEqual(signed_call(self.srv), 200)

    def test_restore_without_its_key(self):
        # the database restored elsewhere without revops.key
        copy = self.srv.db.copy(self.tmp)
        try:
            self.refused(lambda: harness.Server(data_dir=self.tmp, db=copy), "is missing")
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "revops.key")))
            self.restore_key(os.path.join(self.tmp, "revops.key"))
            node = harness.Server(data_dir=self.tmp, db=copy)
            try:
                self.assertEqual(signed_call(node), 200)
            finally:
                node.stop()
        finally:
            copy.drop()

    def test_second_node_needs_the_same_key(self):
        self.srv.start()
        if backend.POSTGRES:
            # a node of its own key on the same database: refused, and the
            # key it made for itself is not left behind
            self.refused(lambda: harness.Server(data_dir=self.tmp, db=self.srv.db),
                         "is missing")
            other = os.path.join(self.tmp, "revops.key")
            with open(other, "wb") as f:
                f.write(os.urandom(32))
            os.chmod(other, 0o600)
            self.refused(lambda: harness.Server(data_dir=self.tmp, db=self.srv.db),
                         "is not the key")
            self.restore_key(other)
            node = harness.Server(data_dir=self.tmp, db=self.srv.db)
            try:
                self.assertEqual(signed_call(node), 200)
            finally:
                node.stop()
        else:
            # SQLite: one server per database file; the running one keeps
            # its key
            self.assertEqual(signed_call(self.srv), 200)


if __name__ == "__main__":
    unittest.main()
