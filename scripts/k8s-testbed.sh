#!/usr/bin/env bash
# A real single-node Kubernetes for @skyward/provider-kubernetes's tests, built from the registries
# alone (issue 32): k8s.io/kubernetes from the Go module proxy, etcd, containerd, runc and the CNI
# plugins from Debian, a pause image from Kubernetes' own pause.c, and a pod image with Python made
# by debootstrap. Everything built is kept in $SKYWARD_K8S_CACHE (outside the repository) so later
# runs only start it (seconds); a run's state lives in $SKYWARD_K8S_RUN and goes at `stop`.
#
#   scripts/k8s-testbed.sh build    # once: binaries and images into the cache (prints its duration)
#   scripts/k8s-testbed.sh start    # build if missing, then start the cluster; prints the kubeconfig
#   scripts/k8s-testbed.sh stop     # every process, mount, network namespace and bridge it made goes
#   scripts/k8s-testbed.sh fresh    # stop a cluster an earlier (killed) run left, then start a new one
#   scripts/k8s-testbed.sh torch-image  # a pod image with PyTorch: built once, imported into the cluster
#
# Only loopback and the bridge it creates ($SKYWARD_K8S_POD_SUBNET) are used.
set -euo pipefail

K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
CACHE="${SKYWARD_K8S_CACHE:-/var/cache/skyward-k8s}"
RUN="${SKYWARD_K8S_RUN:-/run/skyward-k8s}"
POD_SUBNET="${SKYWARD_K8S_POD_SUBNET:-10.214.0.0/24}"
SERVICE_SUBNET="${SKYWARD_K8S_SERVICE_SUBNET:-10.215.0.0/24}"
API_PORT="${SKYWARD_K8S_API_PORT:-16443}"
ETCD_PORT="${SKYWARD_K8S_ETCD_PORT:-23790}"
BRIDGE=skyk8s0
POD_IMAGE=localhost/skyward-python:bookworm
TORCH_IMAGE=localhost/skyward-python-torch:bookworm
PAUSE_IMAGE=registry.k8s.io/pause:3.10
GPUS_PER_NODE="${SKYWARD_K8S_GPUS:-2}"
BIN="$CACHE/bin"
COMPONENTS=(kube-apiserver kubelet kube-scheduler kube-controller-manager kubectl)
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"

log() { printf '[k8s-testbed] %s\n' "$*" >&2; }

ensure_packages() {
  local missing=()
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v umoci >/dev/null || missing+=(umoci)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  command -v openssl >/dev/null || missing+=(openssl)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

built() {
  local component
  for component in "${COMPONENTS[@]}"; do [ -x "$BIN/$component" ] || return 1; done
  [ -f "$CACHE/images/pause.tar" ] && [ -f "$CACHE/images/python.tar" ]
}

# The module's zip leaves out staging/: its replace lines point at the published staging modules
# instead, and the sample modules (not published, needed by nothing built here) are dropped.
build_binaries() {
  local source="$CACHE/src"
  export GOMODCACHE="$CACHE/gomod" GOCACHE="$CACHE/gocache" GOPATH="$CACHE/gopath" GOWORK=off \
    GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
  if [ ! -f "$source/go.mod" ]; then
    local dir
    dir="$(cd "$CACHE" && "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
    rm -rf "$source" && cp -r "$dir" "$source" && chmod -R u+w "$source"
    sed -i -E '/k8s.io\/sample-[a-z-]+ (=>|v0\.0\.0)/d' "$source/go.mod"
    sed -i -E "s#(k8s.io/[a-z-]+) => \./staging/src/k8s.io/[a-z-]+#\1 => \1 $STAGING_VERSION#" "$source/go.mod"
  fi
  mkdir -p "$BIN"
  local component
  for component in "${COMPONENTS[@]}"; do
    [ -x "$BIN/$component" ] && continue
    log "go build $component"
    (cd "$source" && "$GO" build -trimpath -ldflags="-s -w" -o "$BIN/$component" "./cmd/$component")
  done
}

# An OCI layout of one rootfs, written as a docker archive `ctr images import` takes.
pack_image() {
  local rootfs="$1" name="$2" archive="$3" entrypoint="$4"
  local work
  work="$(mktemp -d "$CACHE/pack.XXXXXX")"
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:latest"
  umoci unpack --rootless --image "$work/oci:latest" "$work/bundle" >/dev/null
  cp -a "$rootfs/." "$work/bundle/rootfs/"
  umoci repack --image "$work/oci:latest" "$work/bundle"
  umoci config --image "$work/oci:latest" --config.entrypoint "$entrypoint"
  rm -f "$archive"
  skopeo copy --quiet "oci:$work/oci:latest" "docker-archive:$archive:$name"
  rm -rf "$work"
}

build_images() {
  mkdir -p "$CACHE/images"
  if [ ! -f "$CACHE/images/pause.tar" ]; then
    local rootfs="$CACHE/images/pause-rootfs"
    rm -rf "$rootfs" && mkdir -p "$rootfs"
    gcc -Os -static -o "$rootfs/pause" "$CACHE/src/build/pause/linux/pause.c"
    pack_image "$rootfs" "$PAUSE_IMAGE" "$CACHE/images/pause.tar" /pause
    rm -rf "$rootfs"
  fi
  if [ ! -f "$CACHE/images/python.tar" ]; then
    local rootfs="$CACHE/images/python-rootfs"
    if [ ! -x "$rootfs/usr/bin/python3" ]; then
      rm -rf "$rootfs"
      log "debootstrap bookworm with python3"
      debootstrap --variant=minbase --include=python3 bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
    fi
    rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
    pack_image "$rootfs" "$POD_IMAGE" "$CACHE/images/python.tar" /bin/sh
    rm -rf "$rootfs"
  fi
}

# A second pod image, with Debian's CPU-only PyTorch (python3-torch), for the torch plugin's DDP test:
# built only when that test asks (`torch-image`), not by `build`, so the cluster's own build and
# start stay as fast; kept in the cache like the rest, and imported into the running cluster. pip is
# in it because the plugin asks for `torch`, which pip finds already satisfied offline (without pip
# the bootstrap would fetch uv, and the pods reach no index).
build_torch_image() {
  [ -f "$CACHE/images/python-torch.tar" ] && return 0
  ensure_packages
  local started=$SECONDS rootfs="$CACHE/images/python-torch-rootfs"
  mkdir -p "$CACHE/images"
  if [ ! -f "$rootfs/usr/lib/python3/dist-packages/torch/__init__.py" ]; then
    # A debootstrap killed midway can leave its chroot's /proc and /sys mounted: never rm through them.
    awk -v root="$rootfs" '$2 ~ "^" root "/" {print $2}' /proc/mounts | sort -r | xargs -r -n 1 umount -l 2>/dev/null || true
    rm -rf "$rootfs"
    log "debootstrap bookworm with python3-torch and python3-pip (Debian's packages, about 1.2 GB)"
    debootstrap --variant=minbase --include=python3,python3-pip,python3-torch bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
  fi
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
  pack_image "$rootfs" "$TORCH_IMAGE" "$CACHE/images/python-torch.tar.new" /bin/sh
  mv "$CACHE/images/python-torch.tar.new" "$CACHE/images/python-torch.tar"
  rm -rf "$rootfs"
  log "torch image built in $((SECONDS - started)) s ($(du -m "$CACHE/images/python-torch.tar" | cut -f1) MB)"
}

# The torch image, built when missing, imported into the running cluster (a no-op when already there).
torch_image() {
  build_torch_image
  if ! ctr --address "$RUN/containerd.sock" -n k8s.io images ls -q | grep -qx "$TORCH_IMAGE"; then
    local started=$SECONDS
    ctr --address "$RUN/containerd.sock" -n k8s.io images import "$CACHE/images/python-torch.tar" >/dev/null
    log "torch image imported in $((SECONDS - started)) s"
  fi
  echo "$TORCH_IMAGE"
}

build() {
  local started=$SECONDS
  ensure_packages
  mkdir -p "$CACHE"
  build_binaries
  build_images
  # The Go caches are only needed to build again: most of the disk the build took.
  rm -rf "$CACHE/gocache"
  log "build took $((SECONDS - started)) s (cache $CACHE)"
}

certificate() {
  local name="$1" subject="$2" extensions="$3"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$RUN/pki/$name.key" -subj "$subject" \
    -out "$RUN/pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$RUN/pki/$name.csr" -CA "$RUN/pki/ca.crt" -CAkey "$RUN/pki/ca.key" \
    -CAcreateserial -days 2 -out "$RUN/pki/$name.crt" -extfile <(printf '%s\n' "$extensions") 2>/dev/null
}

kubeconfig() {
  local user="$1"
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: skyward-testbed
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $RUN/pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $RUN/pki/$user.crt
    client-key: $RUN/pki/$user.key
contexts:
- name: skyward-testbed
  context: {cluster: skyward-testbed, user: $user}
current-context: skyward-testbed
EOF
}

write_pki() {
  mkdir -p "$RUN/pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$RUN/pki/ca.key" -out "$RUN/pki/ca.crt" \
    -subj /CN=skyward-testbed-ca -days 2 2>/dev/null
  certificate apiserver /CN=kube-apiserver \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:${SERVICE_SUBNET%.0/*}.1"
  certificate admin "/O=system:masters/CN=admin" "extendedKeyUsage=clientAuth"
  certificate kubelet "/O=system:nodes/CN=system:node:$(hostname)" "extendedKeyUsage=clientAuth"
  certificate kubelet-serving "/CN=$(hostname)" "subjectAltName=DNS:$(hostname),IP:127.0.0.1"
  # A user no role is bound to, for the tests of RBAC refusals.
  certificate nobody "/CN=skyward-nobody" "extendedKeyUsage=clientAuth"
  openssl genrsa -out "$RUN/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$RUN/pki/sa.key" -pubout -out "$RUN/pki/sa.pub" 2>/dev/null
  kubeconfig admin > "$RUN/admin.kubeconfig"
  kubeconfig kubelet > "$RUN/kubelet.kubeconfig"
  kubeconfig nobody > "$RUN/nobody.kubeconfig"
  chmod 600 "$RUN"/pki/*.key "$RUN"/*.kubeconfig
}

write_configs() {
  mkdir -p "$RUN/cni/net.d" "$RUN/logs"
  cat > "$RUN/cni/net.d/10-skyward.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "skyward-testbed", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET"}]], "dataDir": "$RUN/cni/ipam"}}
]}
EOF
  # runc cannot lower oom_score_adj without CAP_SYS_RESOURCE, which this machine's root lacks.
  cat > "$RUN/containerd.toml" <<EOF
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$RUN/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
EOF
  cat > "$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$RUN/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $RUN/pki/kubelet-serving.crt
tlsPrivateKeyFile: $RUN/pki/kubelet-serving.key
address: 127.0.0.1
readOnlyPort: 0
healthzPort: 0
failSwapOn: false
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
EOF
}

start_process() {
  local name="$1"
  shift
  setsid "$@" > "$RUN/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$RUN/$name.pid"
}

wait_for() {
  local what="$1" seconds="$2"
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      log "$what did not come up in $seconds s; logs in $RUN/logs"
      return 1
    fi
    sleep 0.5
  done
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }

start() {
  built || build
  if [ -f "$RUN/kube-apiserver.pid" ] && kill -0 "$(cat "$RUN/kube-apiserver.pid")" 2>/dev/null; then
    echo "$RUN/admin.kubeconfig"
    return 0
  fi
  local started=$SECONDS node
  node="$(hostname)"
  mkdir -p "$RUN"
  write_pki
  write_configs
  start_process etcd etcd --name skyward-testbed --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "skyward-testbed=http://127.0.0.1:$((ETCD_PORT + 10))"
  start_process kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --endpoint-reconciler-type=none --service-cluster-ip-range "$SERVICE_SUBNET" \
    --client-ca-file "$RUN/pki/ca.crt" --tls-cert-file "$RUN/pki/apiserver.crt" \
    --tls-private-key-file "$RUN/pki/apiserver.key" --service-account-key-file "$RUN/pki/sa.pub" \
    --service-account-signing-key-file "$RUN/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --authorization-mode Node,RBAC \
    --kubelet-client-certificate "$RUN/pki/admin.crt" --kubelet-client-key "$RUN/pki/admin.key" \
    --kubelet-preferred-address-types Hostname
  start_process containerd containerd --config "$RUN/containerd.toml"
  wait_for "the API server" 90 kubectl_admin get --raw /readyz
  start_process kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$RUN/admin.kubeconfig" --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 \
    --service-account-private-key-file "$RUN/pki/sa.key" --root-ca-file "$RUN/pki/ca.crt" \
    --use-service-account-credentials=false
  start_process kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$RUN/admin.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 0
  wait_for containerd 30 test -S "$RUN/containerd.sock"
  ctr --address "$RUN/containerd.sock" -n k8s.io images import "$CACHE/images/pause.tar" >/dev/null
  ctr --address "$RUN/containerd.sock" -n k8s.io images import "$CACHE/images/python.tar" >/dev/null
  start_process kubelet "$BIN/kubelet" --kubeconfig "$RUN/kubelet.kubeconfig" --config "$RUN/kubelet.yaml" \
    --root-dir "$RUN/kubelet"
  wait_for "the node" 90 kubectl_admin get node "$node"
  # GPUs as an extended resource on the node's status (what NVIDIA's device plugin would advertise),
  # with the labels its GPU feature discovery sets, so the scheduler's accounting is real.
  kubectl_admin patch node "$node" --subresource=status --type=json -p \
    "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS_PER_NODE\"}]" >/dev/null
  kubectl_admin label node "$node" --overwrite nvidia.com/gpu.product=Tesla-T4 nvidia.com/gpu.memory=15360 \
    nvidia.com/gpu.count="$GPUS_PER_NODE" >/dev/null
  wait_for "the node to be ready" 90 sh -c \
    "'$BIN/kubectl' --kubeconfig '$RUN/admin.kubeconfig' get node '$node' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  # The kubelet copies the capacity into allocatable on its next status update.
  wait_for "nvidia.com/gpu to be allocatable" 90 sh -c \
    "'$BIN/kubectl' --kubeconfig '$RUN/admin.kubeconfig' get node '$node' -o jsonpath='{.status.allocatable.nvidia\\.com/gpu}' | grep -qx '$GPUS_PER_NODE'"
  wait_for "the default service account" 60 kubectl_admin get serviceaccount default
  log "cluster up in $((SECONDS - started)) s"
  echo "$RUN/admin.kubeconfig"
}

stop_pid_file() {
  local file="$1"
  [ -f "$file" ] || return 0
  local pid
  pid="$(cat "$file")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

# The chains the kubelet adds to this machine's firewall (its canaries, and a rule dropping packets to
# 127.0.0.0/8 from elsewhere).
remove_kubelet_iptables() {
  local tool table chain
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for chain in INPUT OUTPUT; do "$tool" -D "$chain" -j KUBE-FIREWALL 2>/dev/null || true; done
    for table in filter nat mangle; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$tool" -t "$table" -F "$chain" 2>/dev/null || true
        "$tool" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

stop() {
  if [ ! -d "$RUN" ]; then
    remove_kubelet_iptables
    return 0
  fi
  if [ -f "$RUN/kube-apiserver.pid" ] && [ -x "$BIN/kubectl" ]; then
    kubectl_admin delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  fi
  stop_pid_file "$RUN/kubelet.pid"
  # The containers' processes, by the cgroups the kubelet made (cgroupfs driver: kubepods/…).
  local cgroup
  for cgroup in /sys/fs/cgroup/*/kubepods; do
    [ -d "$cgroup" ] || continue
    find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
  # The shims of this containerd, found by its own socket path.
  local shim
  for shim in $(pgrep -f -- "-address $RUN/containerd.sock" || true); do kill -9 "$shim" 2>/dev/null || true; done
  stop_pid_file "$RUN/containerd.pid"
  local name
  for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_pid_file "$RUN/$name.pid"; done
  sleep 0.5
  for cgroup in /sys/fs/cgroup/*/kubepods; do
    [ -d "$cgroup" ] && find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # Mounts under the run directory (sandboxes' shm, overlays, volumes) and the pods' network
  # namespaces (containerd's cni-*), deepest first.
  local mount
  for mount in $(awk -v run="$RUN" '$2 ~ "^" run "/" || $2 ~ "^/run/netns/cni-" || $2 ~ "^/var/run/netns/cni-" {print $2}' /proc/mounts | sort -r); do
    umount -l "$mount" 2>/dev/null || true
  done
  rm -f /run/netns/cni-* 2>/dev/null || true
  ip link del "$BRIDGE" 2>/dev/null || true
  remove_kubelet_iptables
  rm -rf "$RUN"
  log "stopped"
}

# What the tests start: a cluster left running by an earlier run that was killed (its pods still
# holding the node's CPU and names, its state maybe under disk pressure) is stopped first, so a run
# never counts another run's pods as its own.
fresh() {
  if [ -f "$RUN/kube-apiserver.pid" ] && kill -0 "$(cat "$RUN/kube-apiserver.pid")" 2>/dev/null; then
    log "a cluster an earlier run left (API server pid $(cat "$RUN/kube-apiserver.pid")) is running: stopping it first"
  fi
  stop
  start
}

case "${1:-}" in
  build) build ;;
  images) build_images ;;
  torch-image-build) build_torch_image ;;
  torch-image) torch_image ;;
  start) start ;;
  stop) stop ;;
  fresh) fresh ;;
  built) built ;;
  kubeconfig) echo "$RUN/admin.kubeconfig" ;;
  *) echo "usage: $0 build|start|stop|fresh|built|kubeconfig|torch-image|torch-image-build" >&2; exit 2 ;;
esac
