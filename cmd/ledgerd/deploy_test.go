package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	stage     int // index of the FROM it belongs to
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	stage := -1
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{cmd: cmd, args: strings.TrimSpace(args), stage: stage})
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued line", path)
	}
	return out
}

// execForm decodes a JSON-array (exec form) argument list.
func execForm(t *testing.T, what, s string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil || len(v) == 0 {
		t.Fatalf("%s is not in exec form (a JSON array; the image has no shell): %s", what, s)
	}
	return v
}

// flagNames are the flags a ledgerd command line accepts, from its own
// -help.
func flagNames(t *testing.T, args ...string) []string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "-help"), &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("%v -help: %v", args, err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("no flags in %v -help:\n%s", args, out.String())
	}
	return names
}

// checkFlags fails for any flag ledgerd (or its subcommand) would refuse.
func checkFlags(t *testing.T, where string, args, known []string) {
	t.Helper()
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if !slices.Contains(known, name) {
				t.Errorf("%s passes --%s, which ledgerd does not take", where, name)
			}
		}
	}
}

// argValue is the value after flag in args.
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// The Dockerfile builds static binaries onto a distroless base, runs as a
// non-root user with the data directory as a volume, and checks health
// with ledgerd itself. (This parses it; no image is built here.)
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, "../../deploy/Dockerfile")
	final := ins[len(ins)-1].stage
	get := func(cmd string) []instruction {
		var out []instruction
		for _, i := range ins {
			if i.cmd == cmd && i.stage == final {
				out = append(out, i)
			}
		}
		return out
	}
	one := func(cmd string) string {
		if got := get(cmd); len(got) == 1 {
			return got[0].args
		}
		t.Fatalf("the final stage has %d %s instructions, want 1", len(get(cmd)), cmd)
		return ""
	}
	base := one("FROM")
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final base %q: want distroless static or scratch", base)
	}
	if r := get("RUN"); len(r) > 0 {
		t.Errorf("the final stage runs %q: distroless has no shell", r[0].args)
	}
	var static bool
	for _, i := range ins {
		if i.cmd == "RUN" && i.stage != final && strings.Contains(i.args, "CGO_ENABLED=0") && strings.Contains(i.args, "./cmd/ledgerd") {
			static = true
		}
	}
	if !static {
		t.Error("ledgerd is not built with CGO_ENABLED=0 (a static binary)")
	}
	if user := one("USER"); user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q: want a non-root user", user)
	} else if !regexp.MustCompile(`^[1-9][0-9]*(:[0-9]+)?$`).MatchString(user) {
		t.Errorf("USER %q: want a numeric uid (a runtime can check it is not root)", user)
	}
	volumes := execForm(t, "VOLUME", one("VOLUME"))
	entry := execForm(t, "ENTRYPOINT", one("ENTRYPOINT"))
	cmd := execForm(t, "CMD", one("CMD"))
	if entry[0] != "/usr/local/bin/ledgerd" {
		t.Errorf("ENTRYPOINT %v: want ledgerd", entry)
	}
	args := append(entry[1:], cmd...)
	checkFlags(t, "ENTRYPOINT and CMD", args, flagNames(t))
	if dir := argValue(args, "--data-dir"); dir == "" || !slices.Contains(volumes, dir) {
		t.Errorf("--data-dir %q is not the VOLUME %v", dir, volumes)
	}
	for _, port := range []string{"9090", "8080"} {
		if !strings.Contains(one("EXPOSE"), port) {
			t.Errorf("EXPOSE %q lacks %s", one("EXPOSE"), port)
		}
		if !strings.HasSuffix(argValue(args, "--grpc-addr"), ":9090") || !strings.HasSuffix(argValue(args, "--http-addr"), ":8080") {
			t.Errorf("ledgerd does not listen on the exposed ports: %v", args)
		}
	}
	if !strings.HasPrefix(argValue(args, "--http-addr"), "0.0.0.0:") {
		t.Errorf("--http-addr %q: in a container ledgerd must listen beyond loopback", argValue(args, "--http-addr"))
	}
	hc := one("HEALTHCHECK")
	_, hcCmd, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q has no CMD", hc)
	}
	probe := execForm(t, "HEALTHCHECK CMD", hcCmd)
	if probe[0] != "/usr/local/bin/ledgerd" || probe[1] != "healthcheck" {
		t.Fatalf("HEALTHCHECK runs %v, want ledgerd healthcheck", probe)
	}
	checkFlags(t, "HEALTHCHECK", probe[2:], flagNames(t, "healthcheck"))
	if u := argValue(probe, "--url"); !strings.HasSuffix(u, "/readyz") || !strings.Contains(u, strings.TrimPrefix(argValue(args, "--http-addr"), "0.0.0.0")) {
		t.Errorf("HEALTHCHECK --url %q: want /readyz on the REST port", u)
	}
}

// The build context leaves out what must never reach an image: the data
// directory (API keys, the log's signing key), the agent's keys, a local
// configuration.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile("../../deploy/Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, want := range []string{"/data/", "/pa/", "/ledgerd.yaml", "*.key"} {
		if !slices.Contains(patterns, want) {
			t.Errorf("deploy/Dockerfile.dockerignore lacks %s", want)
		}
	}
	for _, p := range patterns {
		if p == "*.go" || p == "go.mod" || p == "go.sum" || strings.HasPrefix(p, "/cmd") || p == "*" {
			t.Errorf("deploy/Dockerfile.dockerignore leaves out %s, which the build needs", p)
		}
	}
}

// unit is a systemd unit: section -> key -> values in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.TrimSpace(k) != k {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n+1, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// The systemd unit runs ledgerd hardened: a dynamic user, a read-only
// system but for its state directory, no privileges to gain; SIGHUP on
// reload. (This parses it; systemd is not run here.)
func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, "../../deploy/ledgerd.service")
	svc := u["Service"]
	if svc == nil || u["Unit"] == nil || u["Install"] == nil {
		t.Fatalf("sections: want Unit, Service and Install, got %v", u)
	}
	want := map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "StateDirectory": "pactledger", "NoNewPrivileges": "yes",
		"ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
		"RestrictSUIDSGID": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes",
		"LockPersonality": "yes", "MemoryDenyWriteExecute": "yes", "SystemCallArchitectures": "native", "UMask": "0077",
		"Restart": "on-failure", "ExecReload": "/bin/kill -HUP $MAINPID", "KillSignal": "SIGTERM",
	}
	for k, v := range want {
		if got := svc[k]; len(got) != 1 || got[0] != v {
			t.Errorf("[Service] %s = %q, want %q", k, got, v)
		}
	}
	if fams := strings.Fields(strings.Join(svc["RestrictAddressFamilies"], " ")); !slices.Equal(fams, []string{"AF_INET", "AF_INET6", "AF_UNIX"}) {
		t.Errorf("RestrictAddressFamilies %v", fams)
	}
	if !slices.Contains(svc["SystemCallFilter"], "@system-service") {
		t.Errorf("SystemCallFilter %v lacks @system-service", svc["SystemCallFilter"])
	}
	if got := u["Install"]["WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
		t.Errorf("WantedBy %v", got)
	}
	start := strings.Fields(strings.Join(svc["ExecStart"], ""))
	if len(start) == 0 || start[0] != "/usr/local/bin/ledgerd" {
		t.Fatalf("ExecStart %v: want ledgerd", start)
	}
	checkFlags(t, "ExecStart", start[1:], flagNames(t))
	if dir := argValue(start, "--data-dir"); dir != "/var/lib/"+svc["StateDirectory"][0] {
		t.Errorf("--data-dir %q is not the StateDirectory (the only writable place under ProtectSystem=strict)", dir)
	}
	stop := svc["TimeoutStopSec"]
	if d, err := time.ParseDuration(strings.Join(stop, "")); err != nil || d <= time.Duration(config.Default().ShutdownTimeout) {
		t.Errorf("TimeoutStopSec %v: want longer than ledgerd's default shutdownTimeout", stop)
	}
}
