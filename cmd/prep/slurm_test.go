package main

// TestSlurmArray runs deploy/slurm.sbatch on a real Slurm: a one-node
// cluster of Debian's slurmctld, slurmd and munged, started by the test in
// a temp folder and stopped after it. The deploy tests read the script with
// a parser; this one has Slurm run it, requeue one task while it writes
// shards, and checks that the array wrote what one process writes.
//
// It needs root and the packages, so it runs only with PREP_TEST_SLURM=1,
// which `make test-slurm` sets after installing them; it is compiled (and
// vetted) by every `go test`, so it cannot rot unseen.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prep-dev/prep/internal/testenv"
)

// slurmTestEnv turns TestSlurmArray on.
const slurmTestEnv = "PREP_TEST_SLURM"

// The array's size and the work each task gets: enough shards per task
// (about 33, 2 s of work each) that the requeue lands between a task's
// first shard and its last.
const (
	slurmTasks     = 4
	slurmCopies    = 200
	slurmShardSize = "2MiB"
	slurmRequeued  = 1 // the task requeued mid-run
)

func TestSlurmArray(t *testing.T) {
	if os.Getenv(slurmTestEnv) != "1" {
		t.Skipf("runs a Slurm cluster as root: make test-slurm sets %s=1 after installing slurmctld, slurmd and munge", slurmTestEnv)
	}
	start := time.Now()
	clearTaskEnv(t)
	for _, c := range [][2]string{
		{"munged", "munge"}, {"munge", "munge"}, {"slurmctld", "slurmctld"}, {"slurmd", "slurmd"},
		{"sbatch", "slurm-client"}, {"scontrol", "slurm-client"}, {"squeue", "slurm-client"}, {"sinfo", "slurm-client"},
	} {
		if _, err := exec.LookPath(c[0]); err != nil {
			testenv.Need(t, "the "+c[0]+" command", "make test-slurm installs it (apt-get install --no-install-recommends "+c[1]+")")
		}
	}
	if os.Geteuid() != 0 {
		testenv.Need(t, "root (slurmd starts each job as its user, and munged's key must be root's)", "run make test-slurm as root or with sudo, as CI does")
	}
	prep := prepBinary(t)
	src, err := filepath.Abs("../../testdata/images")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	arrayDst := filepath.Join(dir, "array")
	oneDst := filepath.Join(dir, "one")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}

	// The job script: deploy/slurm.sbatch with only its paths and sizes
	// changed (4 tasks of 1 CPU, small shards, testdata/images made 200
	// times larger with --copies). An edit that no longer matches means the
	// script changed: update the edit with it.
	orig, err := os.ReadFile("../../deploy/slurm.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	script := string(orig)
	for _, e := range [][2]string{
		{"#SBATCH --array=0-15\n", fmt.Sprintf("#SBATCH --array=0-%d\n", slurmTasks-1)},
		{"#SBATCH --cpus-per-task=8\n", "#SBATCH --cpus-per-task=1\n"},
		{"#SBATCH --mem=16G\n", "#SBATCH --mem=100M\n"},
		{"#SBATCH --time=04:00:00\n", "#SBATCH --time=00:10:00\n"},
		{"#SBATCH --output=prep-convert-%A_%a.log\n", "#SBATCH --output=" + logs + "/prep-convert-%A_%a.log\n"},
		{"prep convert /shared/datasets/raw /shared/datasets/shards ", fmt.Sprintf("prep convert %s %s --copies %d ", src, arrayDst, slurmCopies)},
		{"--shard-size 256MiB ", "--shard-size " + slurmShardSize + " "},
	} {
		if n := strings.Count(script, e[0]); n != 1 {
			t.Fatalf("deploy/slurm.sbatch holds %q %d times, not once: update the edits of TestSlurmArray to the script", e[0], n)
		}
		script = strings.Replace(script, e[0], e[1], 1)
	}
	job := filepath.Join(dir, "slurm.sbatch")
	if err := os.WriteFile(job, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// The copy passes the deploy checks too, and gives the flags that one
	// process runs with: task 0's, without the task variables.
	var checked []*checkedCall
	if err := checkSlurm(job, []byte(script), &checked); err != nil {
		t.Fatalf("the edited copy of deploy/slurm.sbatch fails the deploy checks: %v", err)
	}
	calls, err := scriptCalls(script, map[string]string{"SLURM_CPUS_PER_TASK": "1"})
	if err != nil || len(calls) != 1 || calls[0][0] != "convert" {
		t.Fatalf("want one prep convert in %s, got %q (%v)", job, calls, err)
	}
	oneArgs := slices.Clone(calls[0])
	if i := slices.Index(oneArgs, arrayDst); i < 0 {
		t.Fatalf("%s: prep convert %q does not write to %s", job, oneArgs, arrayDst)
	} else {
		oneArgs[i] = oneDst
	}

	// One process first: its shards are what the array must write, and
	// their count gives each task's range.
	one := exec.Command(prep, oneArgs...)
	one.Env = withoutTaskVars(os.Environ())
	if out, err := one.CombinedOutput(); err != nil {
		t.Fatalf("prep %s: %v\n%s", shellQuote(oneArgs), err, out)
	}
	want := readDir(t, oneDst)
	var m struct {
		DatasetID string `json:"dataset_id"`
		Shards    []struct {
			Name string `json:"name"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(want["manifest.json"], &m); err != nil {
		t.Fatalf("%s/manifest.json: %v", oneDst, err)
	}
	shards := len(m.Shards)
	lo, hi := shards*slurmRequeued/slurmTasks, shards*(slurmRequeued+1)/slurmTasks
	if hi-lo < 4 {
		t.Fatalf("task %d has shards %d..%d of %d: too few to requeue it mid-run; raise slurmCopies", slurmRequeued, lo, hi-1, shards)
	}
	t.Logf("one process: %d shards, dataset_id %s, %v", shards, m.DatasetID, time.Since(start).Round(time.Millisecond))

	c := startSlurm(t, dir)
	t.Logf("cluster up: %v", time.Since(start).Round(time.Millisecond))

	sb := c.command("sbatch", "--parsable", job)
	sb.Dir = dir
	sb.Env = append(sb.Env, "PATH="+filepath.Dir(prep)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := sb.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %s: %v\n%s", job, err, out)
	}
	jobID, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "id;cluster" on a federation
	if _, err := strconv.Atoi(jobID); err != nil {
		t.Fatalf("sbatch --parsable printed %q, not a job id", out)
	}
	t.Cleanup(func() { c.cancel(t, jobID) })

	// Requeue task 1 once it has finished a shard of its range and not
	// yet written its manifest part: Slurm kills it and reruns the script,
	// whose --resume keeps the shards it finished.
	part := filepath.Join(arrayDst, fmt.Sprintf("manifest-task-%05d.json", slurmRequeued))
	deadline := time.Now().Add(60 * time.Second)
	for !hasShard(arrayDst, lo, hi) {
		if time.Now().After(deadline) {
			t.Fatalf("array task %d wrote none of shards %d..%d of %s in 60s:\n%s", slurmRequeued, lo, hi-1, arrayDst, c.queue())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(part); err == nil {
		t.Fatalf("array task %d finished (%s) before the test could requeue it: raise slurmCopies", slurmRequeued, part)
	}
	task := fmt.Sprintf("%s_%d", jobID, slurmRequeued)
	if out, err := c.command("scontrol", "requeue", task).CombinedOutput(); err != nil {
		t.Fatalf("scontrol requeue %s: %v\n%s", task, err, out)
	}
	t.Logf("requeued %s: %v", task, time.Since(start).Round(time.Millisecond))

	deadline = time.Now().Add(90 * time.Second)
	for {
		q, err := c.command("squeue", "-h", "-j", jobID, "-o", "%i %T %r").Output()
		if err != nil {
			t.Fatalf("squeue -j %s: %v", jobID, err)
		}
		if len(bytes.TrimSpace(q)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job array %s not done in 90s:\n%s", jobID, q)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("array done: %v", time.Since(start).Round(time.Millisecond))

	// Every task completed, with exit 0, once; the requeued one twice.
	recs := c.jobRecords(t, jobID)
	for k := range slurmTasks {
		r, ok := recs[k]
		switch wantRestarts := map[bool]string{true: "1", false: "0"}[k == slurmRequeued]; {
		case !ok:
			t.Errorf("scontrol show job %s: no record of array task %d", jobID, k)
		case r["JobState"] != "COMPLETED" || r["ExitCode"] != "0:0":
			t.Errorf("array task %d: JobState=%s ExitCode=%s, want COMPLETED 0:0; its log:\n%s", k, r["JobState"], r["ExitCode"], taskLog(logs, jobID, k))
		case r["Restarts"] != wantRestarts:
			t.Errorf("array task %d: Restarts=%s, want %s", k, r["Restarts"], wantRestarts)
		}
	}
	// The requeued task's second run kept what its first finished and
	// converted the rest: it was requeued mid-run, not before or after.
	rerun := taskLog(logs, jobID, slurmRequeued)
	kept := regexp.MustCompile(`kept \d+ samples? \([^)]*\) in (\d+) shards? from the earlier run`).FindStringSubmatch(rerun)
	conv := regexp.MustCompile(`into (\d+) new shards?`).FindStringSubmatch(rerun)
	if kept == nil || conv == nil || kept[1] == "0" || conv[1] == "0" {
		t.Errorf("array task %d's rerun should keep some shards of its first run and convert the others; its log:\n%s", slurmRequeued, rerun)
	} else {
		t.Logf("array task %d, requeued: its rerun kept %s shards and converted %s", slurmRequeued, kept[1], conv[1])
	}
	// One task, the last to finish, merged the parts.
	merged := 0
	for k := range slurmTasks {
		if strings.Contains(taskLog(logs, jobID, k), fmt.Sprintf("merged the parts of %d tasks into %s/manifest.json", slurmTasks, arrayDst)) {
			merged++
		}
	}
	if merged != 1 {
		t.Errorf("%d array tasks say they merged the manifest parts, want 1", merged)
	}

	// The array's files are one process's, byte for byte, plus the parts.
	got := readDir(t, arrayDst)
	for name, b := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: missing; one process wrote it", filepath.Join(arrayDst, name))
		} else if sha256.Sum256(g) != sha256.Sum256(b) {
			t.Errorf("%s: sha256 %x, one process wrote %x", filepath.Join(arrayDst, name), sha256.Sum256(g), sha256.Sum256(b))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok && !regexp.MustCompile(`^manifest-task-0000[0-3]\.json$`).MatchString(name) {
			t.Errorf("%s: one process did not write it", filepath.Join(arrayDst, name))
		}
	}
	var gm struct {
		DatasetID string `json:"dataset_id"`
	}
	if err := json.Unmarshal(got["manifest.json"], &gm); err != nil || gm.DatasetID != m.DatasetID {
		t.Errorf("%s/manifest.json: dataset_id %q (%v), one process's %q", arrayDst, gm.DatasetID, err, m.DatasetID)
	}
	t.Logf("%d shards byte-identical, dataset_id %s; %v in all", shards, gm.DatasetID, time.Since(start).Round(time.Millisecond))
}

// slurmCluster is a one-node Slurm cluster the test started.
type slurmCluster struct {
	dir, conf string
	daemons   []*exec.Cmd
}

// startSlurm writes a munge key, slurm.conf and cgroup.conf under dir,
// starts munged, slurmctld and slurmd there as root in the foreground, on
// free ports and with their own socket, pid and state files (so a cluster
// already on the machine is left alone), waits for the node to be idle,
// and stops them when the test ends.
func startSlurm(t *testing.T, dir string) *slurmCluster {
	t.Helper()
	c := &slurmCluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	for _, d := range []string{"munge", "state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	rand.Read(key)
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "munge", "munge.socket")

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".") // slurmctld and slurmd compare the short name
	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`# Written by TestSlurmArray (cmd/prep/slurm_test.go).
ClusterName=preptest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also delays a requeued job's restart: 5 s, not 120.
AuthInfo=socket=%[4]s,cred_expire=5
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
MailProg=/bin/true
# No cgroups: Slurm 22.05's cgroup v2 plugin needs systemd, which CI lacks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
# The main scheduler every second: a requeued task starts when its delay
# is over, not at the next 60 s pass.
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
KillWait=5
ReturnToService=2
# 4 CPUs on any machine, so that the 4 tasks run at once as on 4 nodes.
SlurmdParameters=config_overrides
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, host, ports[0], ports[1], socket, dir)
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// slurmctld and slurmd read cgroup.conf beside slurm.conf (and stop on a
	// bad one); with proctrack/linuxproc and task/none no cgroup plugin
	// loads, so it constrains nothing.
	cgroup := "CgroupPlugin=autodetect\nConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n"
	if err := os.WriteFile(filepath.Join(dir, "cgroup.conf"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.stop(t) })
	c.daemon(t, "munged", "--foreground", "--force", "--socket="+socket, "--key-file="+keyFile,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--seed-file="+filepath.Join(dir, "munge", "munged.seed"),
		"--log-file="+filepath.Join(dir, "munged.log"))
	c.await(t, "munged to answer on "+socket, func() bool {
		enc, err := exec.Command("munge", "-n", "-S", socket).Output()
		if err != nil {
			return false
		}
		dec := exec.Command("unmunge", "-S", socket)
		dec.Stdin = bytes.NewReader(enc)
		return dec.Run() == nil
	})
	c.daemon(t, "slurmctld", "-D", "-f", c.conf)
	c.daemon(t, "slurmd", "-D", "-f", c.conf)
	c.await(t, "node "+host+" to be idle", func() bool {
		out, err := c.command("sinfo", "-h", "-N", "-o", "%T").Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
	return c
}

// daemon starts name in the foreground, its output to dir/name.out.
func (c *slurmCluster) daemon(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(c.dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = c.env()
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	out.Close() // the child has its own copy
	c.daemons = append(c.daemons, cmd)
}

// await polls ready for up to 30 s, and fails t if it does not come, or
// if a daemon exits meanwhile (stop logs their output).
func (c *slurmCluster) await(t *testing.T, what string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ready() {
		for _, d := range c.daemons {
			// Signal 0 fails once the process is gone (a zombie still
			// answers, so check its state in /proc too).
			if d.Process.Signal(syscall.Signal(0)) != nil || isZombie(d.Process.Pid) {
				t.Fatalf("%s exited while waiting for %s: Slurm failed to start (its output is below)", filepath.Base(d.Path), what)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30s: Slurm failed to start (its output is below)", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// stop ends the daemons, last started first: SIGTERM, then SIGKILL after
// 10 s. On failure it logs their output.
func (c *slurmCluster) stop(t *testing.T) {
	if t.Failed() {
		t.Logf("Slurm's daemons said:\n%s", c.daemonLogs())
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		d.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- d.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not stop in 10s after SIGTERM: killed", filepath.Base(d.Path))
			d.Process.Kill()
			<-done
		}
	}
}

// cancel cancels what is left of the job, as a failed test may leave it,
// and waits up to 20 s for its processes to end, so that stop finds no
// job running.
func (c *slurmCluster) cancel(t *testing.T, jobID string) {
	c.command("scancel", jobID).Run()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		q, err := c.command("squeue", "-h", "-j", jobID).Output()
		if err != nil || len(bytes.TrimSpace(q)) == 0 {
			return
		}
	}
	t.Errorf("job %s still in the queue 20s after scancel:\n%s", jobID, c.queue())
}

// command runs a Slurm client command against this cluster.
func (c *slurmCluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.env()
	return cmd
}

// env is the environment of the daemons and commands: this cluster's
// slurm.conf, and no task variable (sbatch passes its environment to the
// job, and prep would read one of another engine).
func (c *slurmCluster) env() []string {
	return append(withoutTaskVars(os.Environ()), "SLURM_CONF="+c.conf)
}

// queue is squeue's view, for messages.
func (c *slurmCluster) queue() string {
	out, _ := c.command("squeue", "-o", "%i %T %r %M").CombinedOutput()
	return string(out)
}

// jobRecords returns scontrol's fields of each task of array jobID, by
// array task id.
func (c *slurmCluster) jobRecords(t *testing.T, jobID string) map[int]map[string]string {
	t.Helper()
	out, err := c.command("scontrol", "-o", "show", "job", jobID).CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol show job %s: %v\n%s", jobID, err, out)
	}
	recs := map[int]map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		r := map[string]string{}
		for _, f := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(f, "="); ok {
				r[k] = v
			}
		}
		if id, err := strconv.Atoi(r["ArrayTaskId"]); err == nil {
			recs[id] = r
		}
	}
	return recs
}

// daemonLogs is the last 40 lines of each daemon's output.
func (c *slurmCluster) daemonLogs() string {
	var b strings.Builder
	for _, name := range []string{"munged", "slurmctld", "slurmd"} {
		data, err := os.ReadFile(filepath.Join(c.dir, name+".out"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", name, filepath.Join(c.dir, name+".out"), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	return b.String()
}

// taskLog is array task k's output (the last run's, for a requeued task).
func taskLog(logs, jobID string, k int) string {
	b, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("prep-convert-%s_%d.log", jobID, k)))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// hasShard reports whether dir holds a finished shard numbered in
// [lo, hi): one under its own name, not a temp file.
func hasShard(dir string, lo, hi int) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "shard-")
		num, ok2 := strings.CutSuffix(num, ".h5")
		if n, err := strconv.Atoi(num); ok && ok2 && err == nil && n >= lo && n < hi {
			return true
		}
	}
	return false
}

// freePorts returns n TCP ports free on 127.0.0.1 now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// withoutTaskVars is env without the variables prep reads a task from,
// and without Slurm's (a test run inside a Slurm job has them).
func withoutTaskVars(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(taskVars, k) || strings.HasPrefix(k, "SLURM_")
	})
}
