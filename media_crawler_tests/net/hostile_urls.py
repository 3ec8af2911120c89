"""A hostile-URL corpus: every way a stranger's feed has been seen (or could try) to
steer a crawler into the machine's own network, by class.

Every URL here must be refused as disallowed_url before any TCP connection, as an
item URL, behind each redirect code, as a feed URL and as a `next` link. The
names under `.rebind.test` resolve through the test's own resolver (see
connect_recorder.py) to the internal addresses listed in RESOLVER.
"""
from __future__ import annotations

# Where the test's resolver sends each name: internal answers, mixed ones, IPv6 spellings.
RESOLVER = {
    "meta.rebind.test": ["169.254.169.254"],
    "ten.rebind.test": ["10.1.2.3"],
    "loop.rebind.test": ["127.0.0.1"],
    "v6loop.rebind.test": ["::1"],
    "mapped.rebind.test": ["::ffff:10.0.0.1"],
    "nat64.rebind.test": ["64:ff9b::a9fe:a9fe"],
    "cgnat.rebind.test": ["100.64.1.1"],
    "zero.rebind.test": ["0.0.0.0"],
    "mixed.rebind.test": ["93.184.216.34", "10.0.0.1"],  # one public answer to pass a naive first-answer check
    "linklocal6.rebind.test": ["fe80::1"],
}
METADATA = "169.254.169.254"


def corpus(loopback_port: int) -> list[tuple[str, str]]:
    """(class, URL) pairs; `loopback_port` is a port on 127.0.0.1 that nothing lists."""
    p = loopback_port
    numeric_metadata = [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.169.254:80/latest/meta-data/iam/security-credentials/",
        "http://169.254.169.254./latest/meta-data/",
        "http://2852039166/latest/meta-data/",
        "http://0xa9fea9fe/",
        "http://0xA9FEA9FE/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://00251.00376.00251.00376/",
        "http://169.254.43518/",
        "http://169.16689662/",
        "http://0xa9.254.169.254/",
        "http://0251.254.169.254/",
        "http://169.254.169.254.:80/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[::a9fe:a9fe]/",
        "http://[0:0:0:0:0:ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[64:ff9b::169.254.169.254]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[::ffff:0:a9fe:a9fe]/",
        "http://\uff11\uff16\uff19\uff0e\uff12\uff15\uff14\uff0e\uff11\uff16\uff19\uff0e\uff12\uff15\uff14/",
        "http://169\u3002254\u3002169\u3002254/",
        "https://169.254.169.254/",
        "HTTP://169.254.169.254/",
    ]
    parser_confusion = [
        "http://169.254.169.254\\.example.com/latest/meta-data/",
        "http://169.254.169.254\\@example.com/",
        "http://example.com\\@169.254.169.254/",
        "http://example.com@169.254.169.254/",
        "http://user:pass@169.254.169.254/",
        "http://example.com:80@169.254.169.254/",
        "http://169.254.169.254#@example.com/",
        "http://169.254.169.254?@example.com/",
        "http://%31%36%39.254.169.254/",
        "http://%31%36%39%2e%32%35%34%2e%31%36%39%2e%32%35%34/",
        "http://169.254.169.254%2f.example.com/",
        "http://169.254.169.254%00.example.com/",
        "http://169.254.169.254%252f.example.com/",
        "http://169.254.169.254\t.example.com/",
        "http://169.254.169.254 .example.com/",
        "http://169.254.169.254\r\n.example.com/",
        "http://[::1]@example.com/",
        "http:169.254.169.254/latest/",
        "http:/169.254.169.254/latest/",
        "http:\\\\169.254.169.254\\latest",
        "http:///169.254.169.254/",
        "//169.254.169.254/latest/meta-data/",
        " http://169.254.169.254/",
        "http://169.254.169.254:80:80/",
        "http://[169.254.169.254]/",
        "http://[fe80::1%25eth0]/",
        "http://ex%61mple.com@169.254.169.254/",
        "http://0x7f.1:%d/" % p,
    ]
    private_and_loopback = [
        "http://10.0.0.1/", "http://10.255.255.254:8080/", "http://172.16.0.1/", "http://172.31.255.1/",
        "http://192.168.1.1/", "http://192.168.0.1:443/", "http://100.64.0.1/", "http://100.127.255.254/",
        f"http://127.0.0.1:{p}/", f"http://127.0.0.2:{p}/", f"http://127.255.255.254:{p}/", f"http://127.1:{p}/",
        f"http://0.0.0.0:{p}/", f"http://0:{p}/", f"http://[::1]:{p}/", f"http://[::]:{p}/", "http://[fe80::1]/",
        "http://[fc00::1]/", "http://[fd12:3456::1]/", "http://[ff02::1]/", "http://224.0.0.1/",
        "http://255.255.255.255/", "http://198.18.0.1/", "http://192.0.0.1/", "http://240.0.0.1/",
        f"http://localhost:{p}/", f"http://LOCALHOST:{p}/", f"http://localhost.:{p}/", f"http://api.localhost:{p}/",
        f"http://[::ffff:127.0.0.1]:{p}/", f"http://[::127.0.0.1]:{p}/", f"http://[0:0:0:0:0:0:0:1]:{p}/",
        f"http://017700000001:{p}/", f"http://2130706433:{p}/", f"http://0x7f000001:{p}/",
    ]
    resolving_internally = [f"http://{name}:{p}/x.jpg" for name in RESOLVER] + [
        f"http://{name}/x.jpg" for name in RESOLVER] + ["http://META.REBIND.TEST./x.jpg"]
    schemes = [
        "file:///etc/passwd", "file://localhost/etc/passwd", f"gopher://127.0.0.1:{p}/_INFO",
        "ftp://169.254.169.254/", "dict://127.0.0.1:6379/info", "ldap://169.254.169.254/",
        "jar:http://169.254.169.254/x.jar!/", "data:text/plain,hi", "javascript:alert(1)",
        "ws://169.254.169.254/", "netdoc:///etc/passwd", "view-source:http://169.254.169.254/",
    ]
    malformed = [
        "http://[]", "http://[::1.]", "http://a[b/", "http:", "http://?", "http://#", "http://",
        "http://:80/", "http://example.com:99999/", "http://example.com:-1/", "http://exa mple.com/",
        "http://" + "a" * 300 + ".com/", "http://example..com/", "http://-bad-.example.com/",
        "http://example.com:0x50/",
    ]
    classes = [("numeric_metadata", numeric_metadata), ("parser_confusion", parser_confusion),
               ("private_loopback", private_and_loopback), ("resolves_internally", resolving_internally),
               ("scheme", schemes), ("malformed", malformed)]
    return [(name, url) for name, urls in classes for url in urls]


def header_safe(url: str) -> bool:
    """Whether `url` can stand in a Location header as written (no control characters, latin-1)."""
    return url.isascii() and url.isprintable() and url == url.strip()
