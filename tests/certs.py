"""A test CA and a server certificate for 127.0.0.1 (cryptography, already a
dependency): the TLS listener of tests/broker.py's Mosquitto."""
import datetime
import ipaddress
import os


def make_certs(folder):
    """ca.pem, server.pem, server.key in folder; returns their paths."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    os.makedirs(folder, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)

    def cert(subject, issuer, pub, sign_key, serial, ca, san=None):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(pub)
             .serial_number(serial).not_valid_before(now - day).not_valid_after(now + 30 * day)
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return b.sign(sign_key, hashes.SHA256())
    cak = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    can = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'sporadic test CA')])
    ca = cert(can, can, cak.public_key(), cak, 1, True)
    k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sn = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, '127.0.0.1')])
    srv = cert(sn, can, k.public_key(), cak, 2, False,
               [x509.IPAddress(ipaddress.ip_address('127.0.0.1')), x509.DNSName('localhost')])
    paths = {n: os.path.join(folder, n) for n in ('ca.pem', 'server.pem', 'server.key')}
    with open(paths['ca.pem'], 'wb') as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths['server.pem'], 'wb') as f:
        f.write(srv.public_bytes(serialization.Encoding.PEM))
    with open(paths['server.key'], 'wb') as f:
        f.write(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()))
    return paths
