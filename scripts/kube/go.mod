// Small helpers of scripts/kube-cluster.sh: the pause program of every pod's
// sandbox and the packer of its image. A module of their own, with no
// dependencies, so that the broker's `go build ./...` never sees them.
module github.com/wsbroker/wsbroker/scripts/kube

go 1.24
