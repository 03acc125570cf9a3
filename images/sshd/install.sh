#!/bin/sh
# Turns a workspace image into the sshd test target; runs as root inside it,
# from the Dockerfile (RUN) and from build.sh (docker run, then docker commit).
# Arguments are passed to apt-get (build.sh hands over the machine's options).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive

# Installing openssh-server must not start it inside the build.
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
apt-get "$@" -q update
sed -e 's/#.*//' "$here/packages.txt" | xargs apt-get "$@" -q -y --no-install-recommends install
rm -f /usr/sbin/policy-rc.d

# The login of the tests: bash, and an empty home so that no start-up file
# runs for each command. '*' rather than useradd's '!', which sshd without PAM
# treats as a locked account even for key logins.
useradd --uid 1001 --user-group --no-create-home --home-dir /home/wsbtest --shell /bin/bash wsbtest
usermod -p '*' wsbtest
install -d -o wsbtest -g wsbtest -m 0755 /home/wsbtest

# Host keys come at run time; none is baked into the image.
rm -f /etc/ssh/ssh_host_*
install -m 0644 "$here/sshd_config" /etc/ssh/sshd_config
install -m 0755 "$here/entrypoint.sh" /usr/local/sbin/wsb-sshd
install -d -m 0755 /run/sshd /etc/ssh/authorized_keys

# Check the configuration now rather than at the first test.
ssh-keygen -q -t ed25519 -N '' -f /tmp/wsb-check-key
/usr/sbin/sshd -t -f /etc/ssh/sshd_config -h /tmp/wsb-check-key
rm -f /tmp/wsb-check-key /tmp/wsb-check-key.pub

apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
	/var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log
