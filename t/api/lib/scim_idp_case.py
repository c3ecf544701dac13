"""The set-up the identity-provider suites share (test_scim_okta.py,
test_scim_entra.py): one revopsd with a public URL the IdP's assertions name,
one enterprise portfolio with a SCIM token, and a SAML IdP whose
certificate that portfolio trusts."""

import unittest

import harness
import idp as idplib
from harness import idp_set, scim_token_for


class ScimIdpCase(unittest.TestCase):
    """Subclasses set PUBLIC_URL, ENTITY (the IdP's entity id) and PROPERTIES
    (how many properties the portfolio gets); they find cls.srv, cls.pf,
    cls.token (SCIM) and cls.idp."""

    PUBLIC_URL = "http://sp.test"
    ENTITY = None
    PROPERTIES = 1

    @classmethod
    def setUpClass(cls):
        cls.srv = harness.Server(["--public-url", cls.PUBLIC_URL])
        cls.idp = None
        try:
            cls.pf = cls.srv.seed_portfolio("enterprise", cls.PROPERTIES)
            cls.token = scim_token_for(cls.srv, cls.pf.id)
            cls.idp = idplib.IdP(cls.ENTITY, audience=cls.PUBLIC_URL + "/saml/sp",
                                 recipient=cls.PUBLIC_URL + "/oauth/token")
            idp_set(cls.srv, cls.pf.id, cls.ENTITY, cls.idp.cert_path)
        except BaseException:
            if cls.idp:
                cls.idp.cleanup()
            cls.srv.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.idp:
            cls.idp.cleanup()
        cls.srv.close()
