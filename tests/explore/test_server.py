"""The server serves one person: the launch token and the Host header guard every request, no route takes a path,
bad requests get their status and one line, and the page asks nothing of any other machine."""

import re

import pytest
from starlette.testclient import TestClient

from attnlab.explore.launch import page_maker
from attnlab.explore.server import MAX_WAITING, Hosts, create_app

PORT = 8765
TOKEN = "t0k3n"


@pytest.fixture(scope="module")
def client(api):
    app = create_app(api, TOKEN, Hosts.serving("127.0.0.1", PORT), page_maker(api, "en", TOKEN))
    with TestClient(app, base_url=f"http://127.0.0.1:{PORT}") as c:
        yield c


def test_the_page_needs_the_token_and_holds_everything_inline(client):
    assert client.get("/").status_code == 403
    assert client.get("/?token=wrong").status_code == 403
    page = client.get(f"/?token={TOKEN}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "script-src 'nonce-" in policy
    nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
    assert f'<script nonce="{nonce}">' in page.text
    assert page.headers["referrer-policy"] == "no-referrer"  # the token stays out of any Referer
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page.text)  # no script, style or font from elsewhere
    assert "@font-face" in page.text and "data:font/woff2;base64," in page.text
    assert client.get(f"/?token={TOKEN}").headers["content-security-policy"] != policy  # a nonce per page


def test_the_api_takes_the_token_in_the_url_or_a_header(client):
    assert client.get("/api/models").status_code == 403
    models = client.get(f"/api/models?token={TOKEN}").json()
    assert [(m["name"], m["kind"]) for m in models] == [("gpt", "decoder"), ("modern", "decoder"),
                                                        ("windowed", "decoder"), ("s2s", "seq2seq")]
    assert client.get("/api/models", headers={"Authorization": f"token {TOKEN}"}).status_code == 200
    assert client.get("/api/models", headers={"Authorization": "token nope"}).status_code == 403


@pytest.mark.parametrize("host", ["evil.example:8765", "127.0.0.1.evil.example:8765", "127.0.0.1:9999",
                                  "localhost", "10.0.0.5:8765", ""])
def test_a_host_header_other_than_the_address_served_is_refused(client, host):
    answer = client.get(f"/api/models?token={TOKEN}", headers={"Host": host})
    assert answer.status_code == 403 and "not the address this server serves" in answer.json()["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "LOCALHOST:8765", "[::1]:8765"])
def test_the_loopback_names_of_the_address_are_answered(client, host):
    assert client.get(f"/api/models?token={TOKEN}", headers={"Host": host}).status_code == 200


def test_serving_every_address_answers_ip_addresses_but_not_names():
    hosts = Hosts.serving("0.0.0.0", PORT)
    assert hosts.allows("192.168.1.20:8765") and hosts.allows("[fe80::1]:8765") and hosts.allows("localhost:8765")
    assert not hosts.allows("rebound.example:8765") and not hosts.allows("192.168.1.20:80")
    assert Hosts.serving("127.0.0.1", 80).allows("127.0.0.1") and not Hosts.serving("127.0.0.1", 80).allows("evil")


def test_requests_name_no_file(client):
    for path in ("/api/../../etc/passwd", "/etc/passwd", "/assets/app.js", "/api/models/x", "/static/explore.css"):
        answer = client.get(f"{path}?token={TOKEN}")
        assert answer.status_code in (404, 405), path
    answer = client.post(f"/api/forward?token={TOKEN}", json={"model": "/etc/passwd", "text": "a"})
    assert answer.status_code == 404 and "unknown model '/etc/passwd'" in answer.json()["error"]


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"{not json", 400, ["not valid JSON"]),
    (b'{"model": "gpt", "text": ""}', 400, ["text is empty"]),
    (b'{"model": "gpt", "text": "' + b"a" * 100_001 + b'"}', 413, ["100,001 characters", "100,000"]),
    (b'{"model": "nope", "text": "a"}', 404, ["unknown model"]),
])
def test_bad_requests_get_their_status_and_one_line_and_the_server_stays_up(client, body, status, words):
    answer = client.post(f"/api/forward?token={TOKEN}", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == status
    for word in words:
        assert word in answer.json()["error"]
    assert client.get(f"/api/models?token={TOKEN}").status_code == 200


def test_too_large_a_body_is_refused_before_it_is_read(client):
    answer = client.post(f"/api/forward?token={TOKEN}", content=b"x" * 900_000)
    assert answer.status_code == 413 and "bytes" in answer.json()["error"]


def test_methods_and_paths_that_are_not_the_apis(client):
    assert client.get(f"/api/forward?token={TOKEN}").status_code == 405
    answer = client.post(f"/api/shutdown?token={TOKEN}", json={})
    assert answer.status_code == 404 and "the endpoints: models, forward" in answer.json()["error"]


def test_an_answer_in_the_language_the_page_asks_for(client):
    answer = client.post(f"/api/forward?token={TOKEN}&lang=zh", json={"model": "gpt", "text": ""})
    assert answer.status_code == 400 and "是空的" in answer.json()["error"]


def test_the_page_runs_forward_the_way_the_api_documents(client):
    answer = client.post(f"/api/forward?token={TOKEN}", json={"model": "gpt", "text": "To be", "encoding": "base64",
                                                              "detail": {"layer": 0, "head": 1}, "overview": 48})
    data = answer.json()
    assert answer.status_code == 200 and data["detail"]["weights"]["shape"] == [5, 5]
    assert data["overview"]["weights"]["shape"] == [2, 2, 5, 5] and len(data["next_tokens"]) == 10


def test_the_queue_is_bounded():
    assert 20 < MAX_WAITING <= 256  # 20 clients at once fit; a flood is told to try again (503)
