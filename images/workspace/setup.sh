#!/bin/sh
# Shared last step of the workspace image, run as root inside the new root
# filesystem after the packages are installed: by the Dockerfile (RUN) and by
# build.sh (chroot). Keeping it in one file keeps both images the same.
set -eu

# Debian names fd's binary fdfind; the broker (and people) call it fd.
ln -sf /usr/bin/fdfind /usr/local/bin/fd

# The non-root user every command runs as; uid 1000 so files in a bind-mounted
# or copied-out workspace belong to the usual first user on a host.
groupadd --gid 1000 agent
useradd --uid 1000 --gid 1000 --home-dir /home/agent --create-home --shell /bin/bash agent
install -d -o agent -g agent -m 0755 /workspace

# Nothing of apt's download state belongs in an image.
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
	/var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /var/log/bootstrap.log
