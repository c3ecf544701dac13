"""The set-up the identity-provider suites share (test_scim_okta.py,
test_scim_entra.py, test_sso_events.py): one revopsd with a public URL the
IdP's assertions name, one portfolio with a SCIM token (harness.ScimCase),
and a SAML IdP whose certificate that portfolio trusts."""

import harness
import idp as idplib
from harness import idp_set


class ScimIdpCase(harness.ScimCase):
    """Subclasses set PUBLIC_URL, ENTITY (the IdP's entity id), PLAN and
    PROPERTIES (the portfolio's plan and how many properties it gets); they
    find cls.srv, cls.pf, cls.scim_token (SCIM), self.scim() and cls.idp."""

    PUBLIC_URL = "http://sp.test"
    ENTITY = None

    @classmethod
    def setUpClass(cls):
        if not idplib.tools_available():
            raise AssertionError("openssl and xmlsec1 are required (scripts/install-deps.sh)")
        cls.idp = None
        super().setUpClass()

    @classmethod
    def server_args(cls):
        return ["--public-url", cls.PUBLIC_URL]

    @classmethod
    def set_up_server(cls):
        super().set_up_server()
        try:
            cls.idp = idplib.IdP(cls.ENTITY, audience=cls.PUBLIC_URL + "/saml/sp",
                                 recipient=cls.PUBLIC_URL + "/oauth/token")
            idp_set(cls.srv, cls.pf.id, cls.ENTITY, cls.idp.cert_path)
        except BaseException:
            if cls.idp:
                cls.idp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.idp:
            cls.idp.cleanup()
        super().tearDownClass()
