"""A small SAML 2.0 test identity provider for the black-box suites.

Makes, at test time and in a temporary directory, an RSA key and a
self-signed certificate with the openssl CLI, builds <saml:Assertion>
documents from parameters and signs them with the xmlsec1 CLI (enveloped
signature, exclusive C14N, RSA-SHA256 / SHA-256 by default).  Python 3
standard library only; openssl and xmlsec1 come from scripts/install-deps.sh.

    idp = IdP("https://idp.example/metadata", audience=..., recipient=...)
    xml = idp.assertion("alice@example.com", roles=["revenue-approver"])
    form_value = b64url(xml)
"""

import base64
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from xml.sax.saxutils import escape, quoteattr

SAML_NS = "urn:oasis:names:tc:SAML:2.0:assertion"
DS_NS = "http://www.w3.org/2000/09/xmldsig#"
BEARER = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
HOLDER_OF_KEY = "urn:oasis:names:tc:SAML:2.0:cm:holder-of-key"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:saml2-bearer"

EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
ENVELOPED = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
ALGORITHMS = {
    # name: (SignatureMethod, DigestMethod)
    "sha256": ("http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
               "http://www.w3.org/2001/04/xmlenc#sha256"),
    "sha1": ("http://www.w3.org/2000/09/xmldsig#rsa-sha1",
             "http://www.w3.org/2000/09/xmldsig#sha1"),
}

TOOL_TIMEOUT = 30


class ToolError(RuntimeError):
    pass


def _run(argv):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=TOOL_TIMEOUT)
    if p.returncode != 0:
        raise ToolError("%s failed (%d): %s" % (" ".join(argv), p.returncode,
                                                p.stderr.decode(errors="replace")))
    return p


def tools_available():
    return bool(shutil.which("openssl") and shutil.which("xmlsec1"))


def b64url(data, pad=False):
    """base64url of bytes (RFC 4648 §5); without '=' padding unless pad."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    s = base64.urlsafe_b64encode(data).decode("ascii")
    return s if pad else s.rstrip("=")


def saml_time(dt):
    """xs:dateTime in UTC, e.g. 2026-11-22T08:00:00Z."""
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def new_id():
    """An assertion ID (xs:ID: must not start with a digit)."""
    return "_" + uuid.uuid4().hex


class IdP:
    """One identity provider: an entity id, a key pair, a certificate.

    audience and recipient are the defaults for the assertions it makes
    (the service's "<public-url>/saml/sp" and "<public-url>/oauth/token").
    Call cleanup() (or use as a context manager) to remove the key files.
    """

    def __init__(self, entity_id, audience=None, recipient=None, cn="test-idp"):
        self.entity_id = entity_id
        self.audience = audience
        self.recipient = recipient
        self.dir = tempfile.mkdtemp(prefix="revops-idp-")
        self.key_path = os.path.join(self.dir, "key.pem")
        self.cert_path = os.path.join(self.dir, "cert.pem")
        _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
              "-keyout", self.key_path, "-out", self.cert_path, "-days", "2",
              "-subj", "/CN=" + cn])
        with open(self.cert_path, "rb") as f:
            self.cert_pem = f.read()
        self._seq = 0

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()

    # building ---------------------------------------------------------------

    def build(self, name_id, **kw):
        """Unsigned assertion XML (str) with a ds:Signature template (unless
        signature_template=False).  See build_assertion for the keywords."""
        kw.setdefault("issuer", self.entity_id)
        kw.setdefault("audience", self.audience)
        kw.setdefault("recipient", self.recipient)
        return build_assertion(name_id, **kw)

    def sign(self, xml, algorithm="sha256"):
        """Signs a template document with this IdP's key; returns bytes."""
        self._seq += 1
        return sign_with(self.key_path, self.cert_path, xml, self.dir, "%d" % self._seq)

    def assertion(self, name_id, algorithm="sha256", sign=True, **kw):
        """A signed assertion (bytes).  sign=False leaves out the signature
        altogether.  Keywords as build_assertion."""
        if not sign:
            kw["signature_template"] = False
            return self.build(name_id, algorithm=algorithm, **kw).encode("utf-8")
        return self.sign(self.build(name_id, algorithm=algorithm, **kw), algorithm)


def sign_with(key_path, cert_path, xml, workdir, tag="x"):
    """Signs a template document (str or bytes) with the xmlsec1 CLI using
    the PEM key and certificate given; returns the signed bytes."""
    src = os.path.join(workdir, "in-%s.xml" % tag)
    out = os.path.join(workdir, "out-%s.xml" % tag)
    with open(src, "wb") as f:
        f.write(xml.encode("utf-8") if isinstance(xml, str) else xml)
    try:
        _run(["xmlsec1", "--sign", "--privkey-pem", "%s,%s" % (key_path, cert_path),
              "--id-attr:ID", SAML_NS + ":Assertion", "--output", out, src])
        with open(out, "rb") as f:
            return f.read()
    finally:
        for p in (src, out):
            try:
                os.unlink(p)
            except OSError:
                pass


def build_assertion(name_id, issuer, audience, recipient, id=None, roles=(),
                    display_name=None, not_before=None, not_on_or_after=None,
                    confirmation_not_on_or_after=None, bearer=True,
                    confirmation_method=BEARER, algorithm="sha256",
                    signature_template=True, key_info=True, name_id_raw=False,
                    roles_attribute="roles", extra_attributes=(), advice_xml=None,
                    issue_instant=None, xml_declaration=True):
    """The XML text of one <saml:Assertion>.

    name_id        the Subject's NameID (escaped unless name_id_raw)
    id             the assertion ID (a fresh one by default)
    not_before / not_on_or_after
                   Conditions window (datetimes; default now-60 s .. now+300 s)
    confirmation_not_on_or_after
                   SubjectConfirmationData NotOnOrAfter (default = not_on_or_after)
    bearer         False leaves out the SubjectConfirmation
    roles          one AttributeValue each under Attribute Name=roles_attribute
    display_name   an Attribute Name="displayName" when given
    extra_attributes  (name, [values]) pairs
    advice_xml     raw XML placed in a saml:Advice after Conditions
    algorithm      "sha256" or "sha1" (SignatureMethod/DigestMethod)
    """
    now = now_utc()
    id = id or new_id()
    not_before = not_before or now - datetime.timedelta(seconds=60)
    not_on_or_after = not_on_or_after or now + datetime.timedelta(seconds=300)
    confirmation_not_on_or_after = confirmation_not_on_or_after or not_on_or_after
    issue_instant = issue_instant or now
    sig_alg, digest_alg = ALGORITHMS[algorithm]

    out = []
    if xml_declaration:
        out.append('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.append('<saml:Assertion xmlns:saml="%s" xmlns:xs="http://www.w3.org/2001/XMLSchema" '
               'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" ID=%s Version="2.0" '
               'IssueInstant="%s">' % (SAML_NS, quoteattr(id), saml_time(issue_instant)))
    out.append("<saml:Issuer>%s</saml:Issuer>" % escape(issuer))
    if signature_template:
        out.append(
            '<ds:Signature xmlns:ds="%s">'
            "<ds:SignedInfo>"
            '<ds:CanonicalizationMethod Algorithm="%s"/>'
            '<ds:SignatureMethod Algorithm="%s"/>'
            '<ds:Reference URI="#%s">'
            "<ds:Transforms>"
            '<ds:Transform Algorithm="%s"/>'
            '<ds:Transform Algorithm="%s"/>'
            "</ds:Transforms>"
            '<ds:DigestMethod Algorithm="%s"/>'
            "<ds:DigestValue></ds:DigestValue>"
            "</ds:Reference>"
            "</ds:SignedInfo>"
            "<ds:SignatureValue></ds:SignatureValue>"
            "%s"
            "</ds:Signature>"
            % (DS_NS, EXC_C14N, sig_alg, id, ENVELOPED, EXC_C14N, digest_alg,
               "<ds:KeyInfo><ds:X509Data/></ds:KeyInfo>" if key_info else ""))
    out.append("<saml:Subject>")
    out.append('<saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified">'
               "%s</saml:NameID>" % (name_id if name_id_raw else escape(name_id)))
    if bearer:
        attrs = 'NotOnOrAfter="%s"' % saml_time(confirmation_not_on_or_after)
        if recipient is not None:
            attrs += " Recipient=%s" % quoteattr(recipient)
        out.append('<saml:SubjectConfirmation Method=%s>'
                   "<saml:SubjectConfirmationData %s/>"
                   "</saml:SubjectConfirmation>" % (quoteattr(confirmation_method), attrs))
    out.append("</saml:Subject>")
    out.append('<saml:Conditions NotBefore="%s" NotOnOrAfter="%s">'
               % (saml_time(not_before), saml_time(not_on_or_after)))
    if audience is not None:
        out.append("<saml:AudienceRestriction><saml:Audience>%s</saml:Audience>"
                   "</saml:AudienceRestriction>" % escape(audience))
    out.append("</saml:Conditions>")
    if advice_xml is not None:
        out.append("<saml:Advice>%s</saml:Advice>" % advice_xml)
    out.append('<saml:AuthnStatement AuthnInstant="%s" SessionIndex="%s">'
               "<saml:AuthnContext><saml:AuthnContextClassRef>"
               "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
               "</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>"
               % (saml_time(now), id))
    attributes = []
    if roles is not None:
        attributes.append((roles_attribute, list(roles)))
    if display_name is not None:
        attributes.append(("displayName", [display_name]))
    attributes += list(extra_attributes)
    if attributes:
        out.append("<saml:AttributeStatement>")
        for name, values in attributes:
            out.append('<saml:Attribute Name=%s NameFormat='
                       '"urn:oasis:names:tc:SAML:2.0:attrname-format:basic">' % quoteattr(name))
            for v in values:
                out.append('<saml:AttributeValue xsi:type="xs:string">%s</saml:AttributeValue>'
                           % escape(v))
            out.append("</saml:Attribute>")
        out.append("</saml:AttributeStatement>")
    out.append("</saml:Assertion>")
    return "".join(out)


# --------------------------------------------------------------------------
# attacks on signed documents (bytes in, bytes out)

_DECL_RE = re.compile(rb"^\s*<\?xml[^>]*\?>\s*")


def strip_declaration(xml):
    return _DECL_RE.sub(b"", xml, count=1)


def replace_name_id(signed, old, new):
    """Edits the NameID text after signing (the signature no longer matches)."""
    a = b">" + escape(old).encode() + b"</saml:NameID>"
    b = b">" + escape(new).encode() + b"</saml:NameID>"
    if signed.count(a) != 1:
        raise ValueError("NameID %r not found exactly once" % old)
    return signed.replace(a, b)


def wrap_in_root(signed, evil_unsigned):
    """XSW: an unsigned assertion (evil_unsigned, built without a signature
    template) becomes the document root, the signed one nested in its
    saml:Advice."""
    evil = strip_declaration(evil_unsigned if isinstance(evil_unsigned, bytes)
                             else evil_unsigned.encode())
    inner = strip_declaration(signed)
    marker = b"</saml:Conditions>"
    if evil.count(marker) != 1:
        raise ValueError("no Conditions in the wrapper")
    return (b'<?xml version="1.0" encoding="UTF-8"?>\n'
            + evil.replace(marker, marker + b"<saml:Advice>" + inner + b"</saml:Advice>"))


def nest_in_advice(signed, evil_unsigned):
    """XSW: the unsigned assertion goes into a saml:Advice added to the
    signed one after signing."""
    evil = strip_declaration(evil_unsigned if isinstance(evil_unsigned, bytes)
                             else evil_unsigned.encode())
    marker = b"</saml:Conditions>"
    if signed.count(marker) != 1:
        raise ValueError("no Conditions in the signed assertion")
    return signed.replace(marker, marker + b"<saml:Advice>" + evil + b"</saml:Advice>")


def nest_in_signature_object(signed, evil_unsigned):
    """XSW: the unsigned assertion goes into a ds:Object inside the signed
    assertion's ds:Signature.  The enveloped-signature transform removes the
    whole Signature before digesting, so the signature still verifies; the
    evil NameID comes first in document order."""
    evil = strip_declaration(evil_unsigned if isinstance(evil_unsigned, bytes)
                             else evil_unsigned.encode())
    m = re.search(rb"</(\w+:)?Signature>", signed)
    if not m:
        raise ValueError("no Signature in the signed assertion")
    prefix = m.group(1) or b""
    obj = b"<" + prefix + b"Object>" + evil + b"</" + prefix + b"Object>"
    return signed[:m.start()] + obj + signed[m.start():]


def with_doctype(signed, internal_subset):
    """Puts a DOCTYPE (e.g. an external entity declaration) in front of the
    root.  Entities merely declared leave the signed content unchanged."""
    body = strip_declaration(signed)
    return (b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE saml:Assertion ['
            + internal_subset.encode() + b"]>\n" + body)


def verify(signed, cert_path):
    """xmlsec1 --verify with the given certificate (True/False); lets the
    suites check their own fixtures."""
    d = tempfile.mkdtemp(prefix="revops-idp-verify-")
    try:
        p = os.path.join(d, "doc.xml")
        with open(p, "wb") as f:
            f.write(signed)
        r = subprocess.run(["xmlsec1", "--verify", "--pubkey-cert-pem", cert_path,
                            "--id-attr:ID", SAML_NS + ":Assertion", p],
                           stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=TOOL_TIMEOUT)
        return r.returncode == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)
