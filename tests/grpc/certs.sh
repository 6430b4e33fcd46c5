#!/usr/bin/env bash
# Throw-away PEM material for the TLS tests: a CA, a server certificate for "worker.test" and
# 127.0.0.1, a client certificate (mutual TLS). Usage: certs.sh DIR (skips work if DIR/ca.crt exists).
set -eu
d=$1
[ -f "$d/ca.crt" ] && [ -f "$d/client.crt" ] && exit 0
mkdir -p "$d"
cd "$d"
q() { "$@" > /dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=tfrdv test CA" -keyout ca.key -out ca.crt
printf 'subjectAltName=DNS:worker.test,IP:127.0.0.1\n' > server.ext
q openssl req -newkey rsa:2048 -nodes -subj "/CN=worker.test" -keyout server.key -out server.csr
q openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile server.ext -out server.crt
printf 'extendedKeyUsage=clientAuth\n' > client.ext
q openssl req -newkey rsa:2048 -nodes -subj "/CN=tfrdv test client" -keyout client.key -out client.csr
q openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext -out client.crt
rm -f ./*.csr ./*.ext ca.srl
