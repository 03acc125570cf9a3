#!/bin/sh
# Start-up of the wsbroker/sshd test target (installed as
# /usr/local/sbin/wsb-sshd, run under tini): puts the injected host key and
# authorized keys in place, prints the host's public key, then runs sshd in the
# foreground with its log on stderr. Arguments go to sshd (e.g. -o LogLevel=DEBUG3).
set -eu

inject=/etc/wsb-sshd
key=/etc/ssh/wsb_host_key
auth=/etc/ssh/authorized_keys/wsbtest

install -d -m 0755 /run/sshd /etc/ssh/authorized_keys

# Host key: $WSB_HOST_KEY, else $inject/ssh_host_key, else a fresh one.
rm -f "$key" "$key.pub"
if [ -n "${WSB_HOST_KEY:-}" ]; then
	(umask 077 && printf '%s\n' "$WSB_HOST_KEY" >"$key")
elif [ -f "$inject/ssh_host_key" ]; then
	install -m 0600 "$inject/ssh_host_key" "$key"
else
	ssh-keygen -q -t ed25519 -N '' -C wsb-sshd -f "$key"
	echo "wsb-sshd: no host key injected, generated one" >&2
fi
echo "wsb-sshd: host key $(ssh-keygen -y -f "$key")" >&2

# Authorized keys of wsbtest: $WSB_AUTHORIZED_KEYS, else $inject/authorized_keys.
if [ -n "${WSB_AUTHORIZED_KEYS:-}" ]; then
	printf '%s\n' "$WSB_AUTHORIZED_KEYS" >"$auth"
elif [ -f "$inject/authorized_keys" ]; then
	cat "$inject/authorized_keys" >"$auth"
else
	: >"$auth"
	echo "wsb-sshd: no authorized key injected, nobody can log in" >&2
fi
chmod 0644 "$auth"

exec /usr/sbin/sshd -D -e "$@"
