// Package podexec runs commands in the containers of Kubernetes pods over
// the API server's pods/exec subresource (WebSocket first, SPDY when the
// server cannot upgrade to it, as kubectl does), and copies a file into a
// container over such a command's stdin. It knows nothing of workspaces:
// any pod, any container. The kubernetes backend starts its in-box agent
// with it (the agent's binary installed, then `serve --stdio` on one
// long exec stream; see remote.StartStdio).
package podexec
