package main

// The deploy files (Dockerfile, deploy/*) run prep on machines nobody
// watches: a flag renamed in the CLI, a task index used twice or a merge that
// does not wait for every task would only show up there, hours in. These
// tests read each file with a real parser, take out every prep invocation the
// way the engine would build it (image entrypoint, substitutions, variables),
// and put it through the CLI's own cobra flag parsing and the checks convert
// makes before it starts, then check how the tasks fit together.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// deployFiles are the files checked, relative to the repository root.
var deployFiles = []string{
	"Dockerfile",
	"deploy/cloudbuild.yaml",
	"deploy/batch-job.json",
	"deploy/k8s-indexed-job.yaml",
	"deploy/k8s-merge-job.yaml",
	"deploy/slurm.sbatch",
}

// taskVars are the variables convert reads its task from (taskFromEnv).
var taskVars = []string{"CLOUD_RUN_TASK_INDEX", "CLOUD_RUN_TASK_COUNT", "BATCH_TASK_INDEX", "BATCH_TASK_COUNT", "JOB_COMPLETION_INDEX",
	"AWS_BATCH_JOB_ARRAY_INDEX", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX"}

func readDeployFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range deployFiles {
		data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	return files
}

// clearTaskEnv makes the test independent of the machine it runs on (a CI
// job on Cloud Build or Batch sets these) and restores them afterwards;
// t.Setenv also refuses a parallel test, since checkCall changes them.
func clearTaskEnv(t *testing.T) {
	for _, v := range taskVars {
		t.Setenv(v, "")
	}
}

func TestDeployConfigs(t *testing.T) {
	clearTaskEnv(t)
	files := readDeployFiles(t)
	calls, err := checkDeploy(files)
	if err != nil {
		t.Fatalf("deploy files disagree with the CLI:\n%v", err)
	}
	// Not vacuous: every file yields the invocations it should.
	per := map[string]map[string]int{}
	for _, c := range calls {
		if per[c.file] == nil {
			per[c.file] = map[string]int{}
		}
		per[c.file][c.cmd.Name()]++
		t.Logf("%s: %s: prep %s", c.file, c.where, strings.Join(c.argv, " "))
	}
	want := map[string]map[string]int{
		"Dockerfile":                  {"prep": 1}, // CMD ["--help"]
		"deploy/cloudbuild.yaml":      {"convert": 4, "merge-manifest": 1, "bench-read": 1},
		"deploy/batch-job.json":       {"convert": 16}, // one per task of the array
		"deploy/k8s-indexed-job.yaml": {"convert": 8},  // one per completion index
		"deploy/k8s-merge-job.yaml":   {"merge-manifest": 1},
		"deploy/slurm.sbatch":         {"convert": 16}, // one per array task
	}
	for file, w := range want {
		for cmd, n := range w {
			if per[file][cmd] != n {
				t.Errorf("%s: checked %d invocations of prep %s, want %d (all: %v)", file, per[file][cmd], cmd, n, per[file])
			}
		}
	}
}

// TestDeployRejects feeds broken variants of the real files through the same
// checks, so a test that passes means something: each must be refused with
// a message naming the file, the step and the fault.
func TestDeployRejects(t *testing.T) {
	clearTaskEnv(t)
	type edit struct{ old, new string } // old must occur exactly once
	const k8sArgs = `args: [convert, gs://my-bucket/raw, gs://my-bucket/shards, --recipe, "resize=256,crop=224:random,hflip=0.5", --seed, "7", --format, hdf5, --shard-size, 256MiB, --workers, "8", --io-workers, "64", --task-count, "8", --resume, --no-merge]`
	const k8sEnv = "            - name: PREP_STAGING\n              value: /scratch\n"
	tests := []struct {
		name  string
		file  string
		edits []edit
		want  []string // substrings of the error; nil: must pass
	}{
		{"unknown flag", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "2"`, `--shard-sz, 1GiB, --task-index, "2"`}},
			[]string{"deploy/cloudbuild.yaml", "step convert-2", "unknown flag: --shard-sz"}},
		{"missing DST", "deploy/k8s-merge-job.yaml",
			[]edit{{`args: [merge-manifest, gs://my-bucket/shards]`, `args: [merge-manifest]`}},
			[]string{"deploy/k8s-merge-job.yaml", "Job prep-merge container prep", "merge-manifest takes DST, got 0"}},
		{"missing DST in a task", "deploy/cloudbuild.yaml",
			[]edit{{`$_DST, --recipe, $_RECIPE, --seed, $_SEED, --format, hdf5, --shard-size, 256MiB, --workers, "8", --io-workers, "64", --task-index, "1"`,
				`--recipe, $_RECIPE, --seed, $_SEED, --format, hdf5, --shard-size, 256MiB, --workers, "8", --io-workers, "64", --task-index, "1"`}},
			[]string{"step convert-1", "convert takes SRC DST, got 1"}},
		{"extra argument", "deploy/cloudbuild.yaml",
			[]edit{{`args: [bench-read, $_DST/shard-000000.h5]`, `args: [bench-read, $_DST/shard-000000.h5, $_SRC]`}},
			[]string{"step bench-read", "prep bench-read gs://my-bucket/shards/shard-000000.h5 gs://my-bucket/raw: "}},
		{"bad flag value", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "3"`, `--task-index, "3", --shard-size, 256Mb`}},
			[]string{"step convert-3", "--shard-size", `"256Mb"`}},
		{"not a number", "deploy/batch-job.json",
			[]edit{{`"--workers", "8"`, `"--workers", "eight"`}},
			[]string{"deploy/batch-job.json", "taskGroups[0].runnables[0] task 0", `invalid argument "eight" for "--workers"`}},
		{"bad format", "deploy/batch-job.json",
			[]edit{{`"--format", "hdf5"`, `"--format", "h5"`}},
			[]string{"taskGroups[0].runnables[0] task 0", `--format "h5"`}},
		{"no copies", "deploy/batch-job.json",
			[]edit{{`"--workers", "8"`, `"--workers", "8", "--copies", "0"`}},
			[]string{"taskGroups[0].runnables[0] task 0", "--copies 0"}},
		{"bad decoder", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "0"`, `--task-index, "0", --decoder, libjpeg`}},
			[]string{"step convert-0", `--decoder "libjpeg"`}},
		{"bad recipe", "deploy/k8s-indexed-job.yaml",
			[]edit{{`"resize=256,crop=224:random,hflip=0.5"`, `"resize=256,crop=224:random,flip=0.5"`}},
			[]string{"Job prep-convert container prep", "--recipe", "flip"}},
		{"recipe file not in the image", "deploy/k8s-indexed-job.yaml",
			[]edit{{`"resize=256,crop=224:random,hflip=0.5"`, `recipe.yaml`}},
			[]string{"Job prep-convert container prep index 0", "--recipe recipe.yaml: a recipe file is not in the image"}},
		{"bad media flag", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "0"`, `--sample-format, f64, --task-index, "0"`}},
			[]string{"step convert-0", "--sample-format"}},
		{"unknown subcommand", "deploy/cloudbuild.yaml",
			[]edit{{`args: [merge-manifest, $_DST]`, `args: [merge, $_DST]`}},
			[]string{"step merge", `unknown command "merge"`}},
		{"undefined substitution", "deploy/cloudbuild.yaml",
			[]edit{{`args: [merge-manifest, $_DST]`, `args: [merge-manifest, "${_DEST}"]`}},
			[]string{"step merge", "_DEST is not in substitutions"}},
		{"shell variable without $$", "deploy/cloudbuild.yaml",
			[]edit{{`args: [bench-read, $_DST/shard-000000.h5]`, `args: [bench-read, $DST/shard-000000.h5]`}},
			[]string{"step bench-read", "$DST"}},
		{"task index twice", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "3"`, `--task-index, "2"`}},
			[]string{"deploy/cloudbuild.yaml", "task 2 of 4 is run by both step convert-2 and step convert-3", "nothing runs task 3 of 4"}},
		{"task counts differ", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "3", --task-count, "4"`, `--task-index, "3", --task-count, "5"`}},
			[]string{"step convert-3", "task 3 of 5 (--task-count), but there are 4 tasks"}},
		{"tasks disagree on the plan", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "1"`, `--task-index, "1", --copies, "2"`}},
			[]string{"step convert-1", "--copies=2", "step convert-0"}},
		{"tasks run one after another", "deploy/cloudbuild.yaml",
			[]edit{{"id: convert-2\n    name: $_IMAGE\n    waitFor: ['-']\n", "id: convert-2\n    name: $_IMAGE\n"}},
			[]string{"step convert-2 waits for convert-0"}},
		{"merge too early", "deploy/cloudbuild.yaml",
			[]edit{{`waitFor: [convert-0, convert-1, convert-2, convert-3]`, `waitFor: [convert-0, convert-1, convert-3]`}},
			[]string{"step merge does not wait for convert-2"}},
		{"bench-read before merge", "deploy/cloudbuild.yaml",
			[]edit{{`waitFor: [merge]`, `waitFor: ['-']`}},
			[]string{"step bench-read does not wait for merge"}},
		{"waits for a missing step", "deploy/cloudbuild.yaml",
			[]edit{{`waitFor: [merge]`, `waitFor: [merged]`}},
			[]string{"step bench-read", `waitFor "merged"`}},
		{"misspelt field", "deploy/cloudbuild.yaml",
			[]edit{{`waitFor: [merge]`, `waitfor: [merge]`}},
			[]string{"deploy/cloudbuild.yaml", "waitfor"}},
		{"merge elsewhere", "deploy/cloudbuild.yaml",
			[]edit{{`args: [merge-manifest, $_DST]`, `args: [merge-manifest, $_SRC]`}},
			[]string{"step merge", "merges gs://my-bucket/raw", "gs://my-bucket/shards"}},
		{"bench-read elsewhere", "deploy/cloudbuild.yaml",
			[]edit{{`args: [bench-read, $_DST/shard-000000.h5]`, `args: [bench-read, $_SRC]`}},
			[]string{"step bench-read", "reads gs://my-bucket/raw, not the shards in gs://my-bucket/shards"}},
		{"no --resume with retries", "deploy/batch-job.json",
			[]edit{{"\"--io-workers\", \"64\",\n                \"--resume\"", `"--io-workers", "64"`}},
			[]string{"taskGroups[0]", "maxRetryCount 2", "--resume"}},
		{"task count beyond the array", "deploy/batch-job.json",
			[]edit{{`"--resume"`, `"--resume", "--task-count", "8"`}},
			[]string{"taskGroups[0].runnables[0] task 8", "task index 8 is not below the task count 8"}},
		{"more parallelism than tasks", "deploy/batch-job.json",
			[]edit{{`"parallelism": "16"`, `"parallelism": "20"`}},
			[]string{"taskGroups[0]", "parallelism 20"}},
		{"not indexed", "deploy/k8s-indexed-job.yaml",
			[]edit{{"  completionMode: Indexed\n", ""}},
			[]string{"deploy/k8s-indexed-job.yaml", "Job prep-convert", "completionMode: Indexed"}},
		{"completions differ from --task-count", "deploy/k8s-indexed-job.yaml",
			[]edit{{"completions: 8", "completions: 6"}},
			[]string{"Job prep-convert", "parallelism 8 is more than completions 6", "task 0 of 8 (--task-count), but the Job has completions 6"}},
		{"no --task-count on k8s", "deploy/k8s-indexed-job.yaml",
			[]edit{{`--task-count, "8", `, ``}},
			[]string{"Job prep-convert container prep index 0", "set --task-count"}},
		{"undefined k8s variable", "deploy/k8s-indexed-job.yaml",
			[]edit{{`--seed, "7"`, `--seed, $(SEED)`}},
			[]string{"Job prep-convert container prep", "$(SEED)"}},
		{"k8s variable from env", "deploy/k8s-indexed-job.yaml",
			[]edit{{`--seed, "7"`, `--seed, $(SEED)`}, {k8sEnv, k8sEnv + "            - name: SEED\n              value: \"7\"\n"}},
			nil},
		{"shell form", "deploy/k8s-indexed-job.yaml",
			[]edit{{k8sArgs, `command: [sh, -c, 'set -e; exec prep convert gs://my-bucket/raw "$DST" --recipe "resize=256,crop=224:random,hflip=0.5" --seed 7 --task-index "$JOB_COMPLETION_INDEX" --task-count 8 --resume --no-merge']`},
				{k8sEnv, k8sEnv + "            - name: DST\n              value: gs://my-bucket/shards\n"}},
			nil},
		{"shell form, unknown flag", "deploy/k8s-indexed-job.yaml",
			[]edit{{k8sArgs, `command: [sh, -c, 'exec prep convert gs://a gs://b --shard-sz 1GiB --task-count 8 --resume']`}},
			[]string{"Job prep-convert container prep index 0", "unknown flag: --shard-sz"}},
		{"shell form, $@", "deploy/k8s-indexed-job.yaml",
			[]edit{{`args: [convert,`, `command: [sh, -c, 'exec prep "$@"', prep]` + "\n          args: [convert,"}},
			[]string{"Job prep-convert container prep", "$@"}},
		{"shell form hides prep", "deploy/k8s-indexed-job.yaml",
			[]edit{{k8sArgs, `command: [sh, -c, 'cd /tmp && (prep convert a b)']`}},
			[]string{"Job prep-convert container prep", "cannot find it as a command"}},
		{"merge on another DST", "deploy/k8s-merge-job.yaml",
			[]edit{{`gs://my-bucket/shards`, `gs://my-bucket/shards2`}},
			[]string{"Job prep-merge", "merges gs://my-bucket/shards2", "writes gs://my-bucket/shards"}},
		{"cloud build tasks merge too", "deploy/cloudbuild.yaml",
			[]edit{{`--task-index, "2", --task-count, "4", --resume, --no-merge]`, `--task-index, "2", --task-count, "4", --resume]`}},
			[]string{"step convert-2", "step merge merges the manifest parts, so the tasks need --no-merge"}},
		{"k8s pods merge too", "deploy/k8s-indexed-job.yaml",
			[]edit{{`--resume, --no-merge]`, `--resume]`}},
			[]string{"Job prep-convert container prep index 0", "deploy/k8s-merge-job.yaml: Job prep-merge container prep merges the manifest parts, so the tasks need --no-merge"}},
		{"k8s --no-merge, no merge Job", "deploy/k8s-merge-job.yaml",
			[]edit{{"kind: Job", "kind: ConfigMap"}},
			[]string{"Job prep-convert container prep index 0", "--no-merge, but nothing runs prep merge-manifest"}},
		{"batch tasks do not merge", "deploy/batch-job.json",
			[]edit{{`"--resume"`, `"--resume", "--no-merge"`}},
			[]string{"taskGroups[0].runnables[0] task 0", "--no-merge, but nothing runs prep merge-manifest after the tasks"}},
		{"sbatch option misspelt", "deploy/slurm.sbatch",
			[]edit{{"#SBATCH --requeue\n", "#SBATCH --reque\n"}},
			[]string{"deploy/slurm.sbatch", "unknown sbatch option --reque"}},
		{"sbatch short option", "deploy/slurm.sbatch",
			[]edit{{"#SBATCH --array=0-15\n", "#SBATCH -a 0-15 # sixteen tasks\n"}},
			nil},
		{"no job array", "deploy/slurm.sbatch",
			[]edit{{"#SBATCH --array=0-15\n", ""}},
			[]string{"deploy/slurm.sbatch", "no #SBATCH --array"}},
		{"array from 1", "deploy/slurm.sbatch",
			[]edit{{"--array=0-15", "--array=1-16"}},
			nil},
		{"array throttled", "deploy/slurm.sbatch",
			[]edit{{"--array=0-15", "--array=0-15%4"}},
			nil},
		{"array with a step", "deploy/slurm.sbatch",
			[]edit{{"--array=0-15", "--array=0-30:2"}},
			[]string{"deploy/slurm.sbatch: array task 0", "the job array's ids 0..30 (SLURM_ARRAY_TASK_MIN..SLURM_ARRAY_TASK_MAX) are not its 16 tasks"}},
		{"array with gaps", "deploy/slurm.sbatch",
			[]edit{{"--array=0-15", "--array=0-7,9-16"}},
			[]string{"deploy/slurm.sbatch: array task 0", "not its 16 tasks"}},
		{"directive after the command", "deploy/slurm.sbatch",
			[]edit{{"  --resume\n", "  --resume\n#SBATCH --time=01:00:00\n"}},
			[]string{"deploy/slurm.sbatch", `"#SBATCH --time=01:00:00" comes after the first command`}},
		{"requeued without --resume", "deploy/slurm.sbatch",
			[]edit{{" \\\n  --resume\n", "\n"}},
			[]string{"deploy/slurm.sbatch: array task 0", "requeued task", "--resume"}},
		{"not requeued, no --resume", "deploy/slurm.sbatch",
			[]edit{{" \\\n  --resume\n", "\n"}, {"#SBATCH --requeue\n", "#SBATCH --no-requeue\n"}},
			nil},
		{"slurm tasks do not merge", "deploy/slurm.sbatch",
			[]edit{{"  --resume\n", "  --resume --no-merge\n"}},
			[]string{"deploy/slurm.sbatch: array task 0", "--no-merge, but nothing runs prep merge-manifest"}},
		{"merge in every array task", "deploy/slurm.sbatch",
			[]edit{{"  --resume\n", "  --resume\nprep merge-manifest /shared/datasets/shards\n"}},
			[]string{"deploy/slurm.sbatch: array task 1", "prep merge-manifest runs once in each of the 16 array tasks"}},
		{"no cpus-per-task", "deploy/slurm.sbatch",
			[]edit{{"#SBATCH --cpus-per-task=8\n", ""}},
			[]string{"deploy/slurm.sbatch: array task 0", "$SLURM_CPUS_PER_TASK is not defined"}},
		{"slurm flag misspelt", "deploy/slurm.sbatch",
			[]edit{{"--io-workers 64", "--io-worker 64"}},
			[]string{"deploy/slurm.sbatch: array task 0", "unknown flag: --io-worker"}},
		{"no ffmpeg", "Dockerfile",
			[]edit{{"libjxl0.7 ffmpeg", "libjxl0.7"}},
			[]string{"Dockerfile", "runtime stage", "ffmpeg"}},
		{"no libFLAC at run time", "Dockerfile",
			[]edit{{" libflac12 ", " "}},
			[]string{"Dockerfile", "runtime stage", "libFLAC"}},
		{"no libmpg123 at run time", "Dockerfile",
			[]edit{{" libmpg123-0 ", " "}},
			[]string{"Dockerfile", "runtime stage", "libmpg123"}},
		{"no libopusfile at run time", "Dockerfile",
			[]edit{{" libopusfile0 ", " "}},
			[]string{"Dockerfile", "runtime stage", "libopusfile"}},
		{"no libpng at run time", "Dockerfile",
			[]edit{{" libpng16-16 ", " "}},
			[]string{"Dockerfile", "runtime stage", "libpng"}},
		{"no libhdf5 at run time", "Dockerfile",
			[]edit{{" libhdf5-103-1 libhdf5-hl-100 ", " "}},
			[]string{"Dockerfile", "runtime stage", "libhdf5"}},
		{"no libhdf5-dev to build", "Dockerfile",
			[]edit{{" libhdf5-dev ", " "}},
			[]string{"Dockerfile", "build stage", "libhdf5-dev"}},
		{"entrypoint in shell form", "Dockerfile",
			[]edit{{`ENTRYPOINT ["prep"]`, `ENTRYPOINT prep`}},
			[]string{"Dockerfile", "ENTRYPOINT", "exec form"}},
		{"entrypoint not prep", "Dockerfile",
			[]edit{{`ENTRYPOINT ["prep"]`, `ENTRYPOINT ["/bin/sh"]`}},
			[]string{"Dockerfile", "ENTRYPOINT", "/bin/sh"}},
		{"debian releases differ", "Dockerfile",
			[]edit{{"FROM debian:bookworm-slim", "FROM debian:trixie-slim"}},
			[]string{"Dockerfile", "bookworm", "trixie"}},
		{"bad CMD", "Dockerfile",
			[]edit{{`CMD ["--help"]`, `CMD ["--hlep"]`}},
			[]string{"Dockerfile", "CMD", "unknown flag: --hlep"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := readDeployFiles(t)
			text := string(files[tc.file])
			for _, e := range tc.edits {
				if n := strings.Count(text, e.old); n != 1 {
					t.Fatalf("%s holds %q %d times, not once; update this case to the file", tc.file, e.old, n)
				}
				text = strings.Replace(text, e.old, e.new, 1)
			}
			files[tc.file] = []byte(text)
			_, err := checkDeploy(files)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a valid variant was refused:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s edited %q was accepted", tc.file, tc.edits)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestDeployK8sSelfMerging: an Indexed Job whose pods merge the manifest
// themselves needs no merge Job.
func TestDeployK8sSelfMerging(t *testing.T) {
	clearTaskEnv(t)
	files := readDeployFiles(t)
	job := "deploy/k8s-indexed-job.yaml"
	if !bytes.Contains(files[job], []byte(", --no-merge]")) {
		t.Fatalf("%s: no --no-merge to drop; update this test to the file", job)
	}
	files[job] = bytes.Replace(files[job], []byte(", --no-merge]"), []byte("]"), 1)
	files["deploy/k8s-merge-job.yaml"] = nil
	if _, err := checkDeploy(files); err != nil {
		t.Fatalf("self-merging Indexed Job refused:\n%v", err)
	}
}

// TestDocsCommands runs the CLI's flag parsing on every prep command in
// the code blocks of the README and the user's guides in docs/, so that
// each runs as written: a flag renamed or a value refused fails here.
func TestDocsCommands(t *testing.T) {
	clearTaskEnv(t)
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "python", "README.md"))
	var n, many int
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		for i, block := range strings.Split(string(data), "```")[1:] {
			if i%2 == 1 {
				continue // prose between blocks
			}
			for _, line := range docCommands(block) {
				words, err := shellWords(line, nil)
				if err != nil || len(words) != 1 {
					t.Errorf("%s: %s: %v", name, line, err)
					continue
				}
				if _, err := checkCall(prepCall{file: name, where: "a code block", argv: words[0][1:]}); err != nil {
					t.Error(err)
				}
				n++
				if strings.Contains(line, "gs://") || strings.Contains(line, "s3://") {
					many++
				}
			}
		}
	}
	if n < 20 || many < 3 {
		t.Errorf("checked %d prep commands in the docs (%d on object storage), want 20 and 3 or more", n, many)
	}
}

// prepVersionLine is prep version's output, not a command.
var prepVersionLine = regexp.MustCompile(`^prep \d`)

// docCommands returns the prep commands of a code block: lines that start
// with "prep " or "$ prep ", continuation lines joined, cut before a pipe,
// a redirection or a comment. Lines with placeholders (<...>) or an
// ellipsis are examples of a form, not commands.
func docCommands(block string) []string {
	var cmds []string
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		line = strings.TrimPrefix(line, "$ ")
		if !strings.HasPrefix(line, "prep ") || prepVersionLine.MatchString(line) {
			continue
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
		}
		for _, cut := range []string{" | ", " > ", " >> ", " # ", " 2>", " && "} {
			if j := strings.Index(line, cut); j >= 0 {
				line = line[:j]
			}
		}
		if strings.ContainsAny(line, "<>") || strings.Contains(line, "...") || strings.Contains(line, "…") {
			continue
		}
		cmds = append(cmds, line)
	}
	return cmds
}

func TestShellWords(t *testing.T) {
	env := map[string]string{"A": "x y", "B": "b", "E": ""}
	tests := []struct {
		in   string
		want [][]string
		err  string
	}{
		{`prep convert a b`, [][]string{{"prep", "convert", "a", "b"}}, ""},
		{`prep 'a b' "c d" e\ f`, [][]string{{"prep", "a b", "c d", "e f"}}, ""},
		{`prep "" ''`, [][]string{{"prep", "", ""}}, ""},
		{`prep "$B"x ${B} $A "$A" $E`, [][]string{{"prep", "bx", "b", "x", "y", "x y"}}, ""},
		{"set -e; prep a && prep b || echo no\nprep c | cat # done", [][]string{{"set", "-e"}, {"prep", "a"}, {"prep", "b"}, {"echo", "no"}, {"prep", "c"}, {"cat"}}, ""},
		{`prep "a\"b\$c\\" 'it''s'`, [][]string{{"prep", `a"b$c\`, "its"}}, ""},
		{"prep a \\\n  b", [][]string{{"prep", "a", "b"}}, ""},
		{`prep $C`, nil, "$C is not defined"},
		{`prep $(ls)`, nil, "command substitution"},
		{"prep `ls`", nil, "command substitution"},
		{`prep "a`, nil, "unterminated"},
		{`prep > log`, nil, "redirection"},
		{`prep $1`, nil, "$1"},
	}
	for _, tc := range tests {
		got, err := shellWords(tc.in, env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("shellWords(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// ---- one invocation ----

// prepCall is one prep invocation found in a deploy file.
type prepCall struct {
	file, where string
	argv        []string          // the words after prep
	env         map[string]string // the variables the engine sets for it
}

// checkedCall is a prepCall that parsed.
type checkedCall struct {
	prepCall
	cmd                  *cobra.Command // flags parsed into it
	args                 []string       // positional arguments
	help                 bool
	taskIndex, taskCount int // convert: this task, as convert resolves it
}

func (c prepCall) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: %s: prep %s: %s", c.file, c.where, shellQuote(c.argv), fmt.Sprintf(format, a...))
}

// checkCall runs the CLI's own parsing on c: the real command tree, its
// flags, its positional-argument rule, and the checks convert makes before
// it touches any data. It never runs a command.
func checkCall(c prepCall) (*checkedCall, error) {
	root := newRoot()
	cmd, rest, err := root.Find(c.argv)
	if err != nil {
		return nil, c.errorf("%v", err)
	}
	cmd.InitDefaultHelpFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, c.errorf("%v", err)
	}
	cc := &checkedCall{prepCall: c, cmd: cmd, args: cmd.Flags().Args()}
	if cc.help, _ = cmd.Flags().GetBool("help"); cc.help {
		return cc, nil
	}
	if cmd == root {
		return nil, c.errorf("no subcommand")
	}
	for _, check := range []func() error{
		func() error { return cmd.ValidateArgs(cc.args) },
		cmd.ValidateRequiredFlags,
		cmd.ValidateFlagGroups,
	} {
		if err := check(); err != nil {
			return nil, c.errorf("%v", err)
		}
	}
	if cmd.Name() == "convert" {
		if err := checkConvertFlags(cc); err != nil {
			return nil, c.errorf("%v", err)
		}
	}
	return cc, nil
}

// checkConvertFlags runs convert's own flag check (convertFlags.check)
// on the parsed flags, with the task resolved as the engine's variables
// give it.
func checkConvertFlags(cc *checkedCall) error {
	fl := cc.cmd.Flags()
	var errs []error
	str := func(name string) string {
		v, err := fl.GetString(name)
		errs = append(errs, err)
		return v
	}
	num := func(name string) int {
		v, err := fl.GetInt(name)
		errs = append(errs, err)
		return v
	}
	num64 := func(name string) int64 {
		v, err := fl.GetInt64(name)
		errs = append(errs, err)
		return v
	}
	float := func(name string) float64 {
		v, err := fl.GetFloat64(name)
		errs = append(errs, err)
		return v
	}
	var f convertFlags
	f.shardSize, f.recipe, f.format, f.decoder, f.order = str("shard-size"), str("recipe"), str("format"), str("decoder"), str("order")
	f.maxSampleSize = str("max-sample-bytes")
	f.copies, f.workers, f.ioWorkers, f.splitAxis = num("copies"), num("workers"), num("io-workers"), num("split-axis")
	f.taskIndex, f.taskCount = num("task-index"), num("task-count")
	f.video.FPS, f.video.Every, f.video.Clip, f.video.MaxFrames = float("fps"), num("every"), num("clip"), num("max-frames")
	f.audio.Rate, f.audio.Channels, f.audio.Duration, f.audio.SampleFormat = num("rate"), num("channels"), float("duration"), str("sample-format")
	f.maxPixels = num64("max-pixels")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the test reads a convert flag that is gone: %w", err)
	}
	if ext := strings.ToLower(path.Ext(f.recipe)); (ext == ".yaml" || ext == ".yml" || ext == ".json") && !strings.Contains(f.recipe, "=") {
		return fmt.Errorf("--recipe %s: a recipe file is not in the image; give the recipe inline, so it can be checked here", f.recipe)
	}
	var c checkedFlags
	var err error
	withEnv(cc.env, func() { c, err = f.check() })
	cc.taskIndex, cc.taskCount = c.taskIndex, c.taskCount
	return err
}

// withEnv runs fn with exactly the task variables of env set.
func withEnv(env map[string]string, fn func()) {
	saved := map[string]string{}
	for _, v := range taskVars {
		saved[v] = os.Getenv(v)
		os.Setenv(v, env[v])
	}
	defer func() {
		for v, s := range saved {
			os.Setenv(v, s)
		}
	}()
	fn()
}

// plan is what every task of one run must agree on: the positional
// arguments and every flag given, except the task's own index.
func (cc *checkedCall) plan() string {
	parts := []string{cc.cmd.Name()}
	parts = append(parts, cc.args...)
	cc.cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "task-index" {
			parts = append(parts, "--"+f.Name+"="+f.Value.String())
		}
	})
	return shellQuote(parts)
}

func (cc *checkedCall) noMerge() bool {
	v, _ := cc.cmd.Flags().GetBool("no-merge")
	return v
}

func (cc *checkedCall) resumes() bool {
	r, _ := cc.cmd.Flags().GetBool("resume")
	o, _ := cc.cmd.Flags().GetBool("overwrite")
	return r || o
}

// ---- finding the invocations ----

// isPrepBinary: "prep" on PATH or a path to it.
func isPrepBinary(w string) bool {
	return w == "prep" || (strings.HasPrefix(w, "/") && path.Base(w) == "prep")
}

// isPrepImage: an image reference whose repository is .../prep.
func isPrepImage(ref string) bool {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return path.Base(ref) == "prep"
}

var prepWord = regexp.MustCompile(`(^|[\s;&|'"(])(/\S*/)?prep($|[\s;&|'")])`)

func mentionsPrep(words []string) bool {
	return slices.ContainsFunc(words, prepWord.MatchString)
}

var scriptShells = []string{"sh", "bash", "dash", "ash"}

// extractCalls finds the prep invocations in the argument vector a
// container runs: prep itself, or a shell's -c script.
func extractCalls(argv []string, env map[string]string) ([][]string, error) {
	if len(argv) == 0 {
		return nil, nil
	}
	if isPrepBinary(argv[0]) {
		return [][]string{argv[1:]}, nil
	}
	if slices.Contains(scriptShells, path.Base(argv[0])) {
		for i := 1; i < len(argv) && strings.HasPrefix(argv[i], "-"); i++ {
			if strings.Contains(argv[i], "c") && i+1 < len(argv) {
				return scriptCalls(argv[i+1], env)
			}
		}
	}
	if mentionsPrep(argv) {
		return nil, fmt.Errorf("cannot tell how %q runs prep: run prep directly, or through sh -c", argv)
	}
	return nil, nil
}

// scriptCalls finds the prep commands of a shell script.
func scriptCalls(script string, env map[string]string) ([][]string, error) {
	cmds, err := shellWords(script, env)
	if err != nil {
		return nil, fmt.Errorf("shell script %q: %w", script, err)
	}
	var calls [][]string
	for _, words := range cmds {
		for len(words) > 0 && (words[0] == "exec" || words[0] == "time" || words[0] == "nohup") {
			words = words[1:]
		}
		if len(words) > 0 && isPrepBinary(words[0]) {
			calls = append(calls, words[1:])
		}
	}
	if len(calls) == 0 && mentionsPrep([]string{script}) {
		return nil, fmt.Errorf("shell script %q mentions prep, but the test cannot find it as a command", script)
	}
	return calls, nil
}

// shellWords splits a POSIX shell script into commands and their words, the
// way sh would for the simple scripts a job spec holds: quotes, backslashes,
// $VAR and ${VAR} (from env; unquoted ones are split on blanks), and the
// separators ; & && | || and newline. Anything else (command substitution,
// redirection, $1 or $@) is an error rather than a guess.
func shellWords(s string, env map[string]string) ([][]string, error) {
	var (
		cmds   [][]string
		words  []string
		word   strings.Builder
		inWord bool
	)
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	// expand reads a $ expansion at s[i] (s[i] == '$'); it returns the value
	// and the index after it.
	expand := func(i int) (string, int, error) {
		rest := s[i+1:]
		var name string
		n := 0
		switch {
		case strings.HasPrefix(rest, "("):
			return "", 0, fmt.Errorf("command substitution %q is not supported", "$(")
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", 0, errors.New("unterminated ${")
			}
			name, n = rest[1:end], end+1
		default:
			for n < len(rest) && (rest[n] == '_' || isAlnum(rest[n])) {
				n++
			}
			name = rest[:n]
		}
		if name == "" || !(name[0] == '_' || isAlpha(name[0])) || strings.ContainsFunc(name, func(r rune) bool { return r != '_' && (r > 127 || !isAlnum(byte(r))) }) {
			if name == "" && n == 0 && len(rest) > 0 {
				name = rest[:1]
			}
			return "", 0, fmt.Errorf("$%s: only $NAME and ${NAME} are supported", name)
		}
		v, ok := env[name]
		if !ok {
			return "", 0, fmt.Errorf("$%s is not defined", name)
		}
		return v, i + 1 + n, nil
	}
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case ch == '\n' || ch == ';' || ch == '&' || ch == '|':
			endCmd()
			i++
		case ch == ' ' || ch == '\t':
			endWord()
			i++
		case ch == '<' || ch == '>':
			return nil, fmt.Errorf("redirection %q is not supported", string(ch))
		case ch == '`':
			return nil, errors.New("command substitution with ` is not supported")
		case ch == '\\':
			if i+1 < len(s) && s[i+1] == '\n' {
				i += 2 // line continuation
				continue
			}
			if i+1 < len(s) {
				word.WriteByte(s[i+1])
				inWord = true
			}
			i += 2
		case ch == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated '")
			}
			word.WriteString(s[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case ch == '"':
			inWord = true
			i++
			for {
				if i >= len(s) {
					return nil, errors.New(`unterminated "`)
				}
				c := s[i]
				if c == '"' {
					i++
					break
				}
				switch {
				case c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0:
					if s[i+1] != '\n' {
						word.WriteByte(s[i+1])
					}
					i += 2
				case c == '`':
					return nil, errors.New("command substitution with ` is not supported")
				case c == '$':
					v, next, err := expand(i)
					if err != nil {
						return nil, err
					}
					word.WriteString(v)
					i = next
				default:
					word.WriteByte(c)
					i++
				}
			}
		case ch == '$':
			v, next, err := expand(i)
			if err != nil {
				return nil, err
			}
			// An unquoted expansion is split into fields on blanks.
			fields := strings.Fields(v)
			if len(fields) > 0 && strings.IndexAny(v[:1], " \t\n") >= 0 {
				endWord()
			}
			for j, f := range fields {
				if j > 0 {
					endWord()
				}
				word.WriteString(f)
				inWord = true
			}
			if len(fields) > 0 && strings.IndexAny(v[len(v)-1:], " \t\n") >= 0 {
				endWord()
			}
			i = next
		default:
			word.WriteByte(ch)
			inWord = true
			i++
		}
	}
	endCmd()
	return cmds, nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }

// shellQuote joins words the way a shell would read them back.
func shellQuote(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsFunc(w, func(r rune) bool {
			return !(r < 128 && (isAlnum(byte(r)) || strings.ContainsRune("-_./:=,@%+", r)))
		}) {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// expandVars replaces $(VAR) (Kubernetes) and ${VAR} references from env;
// $$ is a literal $. An undefined variable is an error: Kubernetes would
// pass "$(VAR)" through as it is.
func expandVars(s string, env map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		var close byte
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			close = ')'
		case '{':
			close = '}'
		default:
			b.WriteByte('$')
			continue
		}
		end := strings.IndexByte(s[i+2:], close)
		if end < 0 {
			return "", fmt.Errorf("%q: unterminated $%c", s, s[i+1])
		}
		name := s[i+2 : i+2+end]
		v, ok := env[name]
		if !ok {
			return "", fmt.Errorf("%q: $%c%s%c is not defined in the file", s, s[i+1], name, close)
		}
		b.WriteString(v)
		i += 2 + end
	}
	return b.String(), nil
}

// ---- all files ----

// checkDeploy checks every deploy file and how they fit together; it
// returns the invocations it checked and every fault found.
func checkDeploy(files map[string][]byte) ([]*checkedCall, error) {
	var calls []*checkedCall
	var errs []error
	img, err := checkDockerfile("Dockerfile", files["Dockerfile"], &calls)
	errs = append(errs, err)
	if img == nil {
		img = &imageConfig{} // the other files are still checked
	}
	errs = append(errs,
		checkCloudBuild("deploy/cloudbuild.yaml", files["deploy/cloudbuild.yaml"], img, &calls),
		checkBatch("deploy/batch-job.json", files["deploy/batch-job.json"], img, &calls),
		checkK8s([]string{"deploy/k8s-indexed-job.yaml", "deploy/k8s-merge-job.yaml"}, files, img, &calls),
		checkSlurm("deploy/slurm.sbatch", files["deploy/slurm.sbatch"], &calls),
	)
	return calls, errors.Join(errs...)
}

// imageConfig is what the engines take from the image when a step or
// container does not say what to run.
type imageConfig struct {
	entrypoint, cmd []string
}

// argv is what a container runs: Docker's rule, where a given entrypoint
// drops the image's CMD, and given args replace it.
func (img *imageConfig) argv(entrypoint, args []string) []string {
	if len(entrypoint) > 0 {
		return slices.Concat(entrypoint, args)
	}
	if len(args) == 0 {
		args = img.cmd
	}
	return slices.Concat(img.entrypoint, args)
}

// ---- Dockerfile ----

type dockerStage struct {
	from, name string
	instrs     []dockerInstr
}

type dockerInstr struct {
	op, args string
	line     int
}

func parseDockerfile(data []byte) []dockerStage {
	var stages []dockerStage
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue // comments inside a continued instruction are dropped
			}
			l = strings.TrimSuffix(l, "\\") + " " + next
		}
		op, args, _ := strings.Cut(l, " ")
		in := dockerInstr{op: strings.ToUpper(op), args: strings.TrimSpace(args), line: start + 1}
		if in.op == "FROM" {
			f := strings.Fields(in.args)
			st := dockerStage{}
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) > 0 {
				st.from = f[0]
			}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
		}
	}
	return stages
}

// aptPackages lists what the stage's RUN lines apt-get install.
func (st dockerStage) aptPackages() []string {
	var pkgs []string
	for _, in := range st.instrs {
		if in.op != "RUN" {
			continue
		}
		for _, part := range regexp.MustCompile(`&&|;|\|\|`).Split(in.args, -1) {
			f := strings.Fields(part)
			i := slices.Index(f, "install")
			if i < 1 || !slices.ContainsFunc(f[:i], func(w string) bool { return w == "apt-get" || w == "apt" }) {
				continue
			}
			for _, w := range f[i+1:] {
				if !strings.HasPrefix(w, "-") {
					pkgs = append(pkgs, w)
				}
			}
		}
	}
	return pkgs
}

var debianReleases = []string{"buster", "bullseye", "bookworm", "trixie", "focal", "jammy", "noble"}

func release(image string) string {
	for _, r := range debianReleases {
		if strings.Contains(image, r) {
			return r
		}
	}
	return ""
}

func checkDockerfile(file string, data []byte, calls *[]*checkedCall) (*imageConfig, error) {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)))
	}
	stages := parseDockerfile(data)
	if len(stages) < 2 {
		fail("want a build stage and a runtime stage, found %d stages", len(stages))
		return nil, errors.Join(errs...)
	}
	rt := stages[len(stages)-1]
	img := &imageConfig{}
	execForm := func(in dockerInstr) []string {
		var v []string
		if err := json.Unmarshal([]byte(in.args), &v); err != nil {
			fail("line %d: %s %s: use the exec form, a JSON array (the shell form drops the arguments engines pass)", in.line, in.op, in.args)
		}
		return v
	}
	// The binary: copied from the build stage, run by ENTRYPOINT.
	var binary string
	var build *dockerStage
	for _, in := range rt.instrs {
		switch in.op {
		case "ENTRYPOINT":
			img.entrypoint = execForm(in)
		case "CMD":
			img.cmd = execForm(in)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") && path.Base(f[2]) == "prep" {
				binary = f[2]
				for i := range stages[:len(stages)-1] {
					if stages[i].name == strings.TrimPrefix(f[0], "--from=") {
						build = &stages[i]
						if !slices.ContainsFunc(build.instrs, func(b dockerInstr) bool {
							return b.op == "RUN" && strings.Contains(b.args, "go build") &&
								strings.Contains(b.args, "-o "+f[1]+" ") && strings.HasSuffix(b.args, "./cmd/prep") &&
								!strings.Contains(b.args, "CGO_ENABLED=0")
						}) {
							fail("build stage %s: no RUN ... go build -o %s ./cmd/prep (with cgo) makes the binary the runtime stage copies", build.name, f[1])
						}
					}
				}
			}
		}
	}
	switch {
	case binary == "":
		fail("runtime stage: no COPY --from=<build stage> ... /usr/local/bin/prep")
	case build == nil:
		fail("runtime stage: prep is copied from a stage this file does not build")
	}
	onPath := binary != "" && slices.Contains([]string{"/usr/local/bin", "/usr/bin", "/bin"}, path.Dir(binary))
	if len(img.entrypoint) != 1 || !(img.entrypoint[0] == binary || img.entrypoint[0] == "prep" && onPath) {
		fail("runtime stage: ENTRYPOINT %q: want [\"prep\"], the binary copied to %s, so that engines pass only prep's arguments", img.entrypoint, binary)
	}
	// Libraries: headers to build, shared libraries and ffmpeg to run.
	if build != nil {
		if !slices.Contains(build.aptPackages(), "libhdf5-dev") {
			fail("build stage %s: installs no libhdf5-dev (cgo needs hdf5.h)", build.name)
		}
		if b, r := release(build.from), release(rt.from); b == "" || b != r {
			fail("build stage FROM %s and runtime stage FROM %s: want the same Debian release, so the libhdf5 the binary links is the one installed", build.from, rt.from)
		}
		if goVer := goModVersion(); goVer != "" {
			if tag := regexp.MustCompile(`^golang:(\d+\.\d+)`).FindStringSubmatch(build.from); tag == nil || versionLess(tag[1], goVer) {
				fail("build stage FROM %s: go.mod needs Go %s", build.from, goVer)
			}
		}
	}
	pkgs := rt.aptPackages()
	// The shared libraries the binary links (ldd bin/prep), by package name.
	for _, lib := range []struct{ pkg, name, use string }{
		{"libhdf5", "libhdf5", "shards"}, {"libpng", "libpng", "PNG decoding"}, {"libflac", "libFLAC", "FLAC decoding"},
		{"libmpg123", "libmpg123", "MP3 decoding"}, {"libopusfile", "libopusfile", "Opus decoding"},
	} {
		if !slices.ContainsFunc(pkgs, func(p string) bool { return strings.HasPrefix(p, lib.pkg) && !strings.HasSuffix(p, "-dev") }) {
			fail("runtime stage: installs no %s runtime library (%s) (%q)", lib.name, lib.use, pkgs)
		}
	}
	if !slices.Contains(pkgs, "ffmpeg") {
		fail("runtime stage: installs no ffmpeg (video and audio inputs) (%q)", pkgs)
	}
	if i := slices.IndexFunc(pkgs, func(p string) bool { return strings.HasSuffix(p, "-dev") }); i >= 0 {
		fail("runtime stage: installs %s; keep build-only packages in the build stage", pkgs[i])
	}
	// What `docker run IMAGE` with no arguments runs.
	if len(img.entrypoint) == 1 && isPrepBinary(img.entrypoint[0]) {
		c := prepCall{file: file, where: "ENTRYPOINT + CMD", argv: img.cmd}
		if cc, err := checkCall(c); err != nil {
			errs = append(errs, err)
		} else {
			*calls = append(*calls, cc)
		}
	}
	return img, errors.Join(errs...)
}

func goModVersion() string {
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		return ""
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// versionLess compares "major.minor" versions.
func versionLess(a, b string) bool {
	pa, pb := strings.SplitN(a, ".", 2), strings.SplitN(b, ".", 2)
	for i := range 2 {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return false
}

// ---- Cloud Build ----

// cloudBuild lists every field of a build config, so that a misspelt one
// (waitfor) fails here as it fails `gcloud builds submit`.
type cloudBuild struct {
	Steps            []cloudBuildStep  `yaml:"steps"`
	Substitutions    map[string]string `yaml:"substitutions"`
	Options          map[string]any    `yaml:"options"`
	Timeout          string            `yaml:"timeout"`
	QueueTTL         string            `yaml:"queueTtl"`
	LogsBucket       string            `yaml:"logsBucket"`
	Tags             []string          `yaml:"tags"`
	Images           []string          `yaml:"images"`
	Artifacts        any               `yaml:"artifacts"`
	Secrets          any               `yaml:"secrets"`
	AvailableSecrets any               `yaml:"availableSecrets"`
	ServiceAccount   string            `yaml:"serviceAccount"`
}

type cloudBuildStep struct {
	Name                 string   `yaml:"name"`
	ID                   string   `yaml:"id"`
	Entrypoint           string   `yaml:"entrypoint"`
	Args                 []string `yaml:"args"`
	Script               string   `yaml:"script"`
	Env                  []string `yaml:"env"`
	WaitFor              []string `yaml:"waitFor"`
	Dir                  string   `yaml:"dir"`
	SecretEnv            []string `yaml:"secretEnv"`
	Volumes              any      `yaml:"volumes"`
	Timeout              string   `yaml:"timeout"`
	AllowFailure         bool     `yaml:"allowFailure"`
	AllowExitCodes       []int    `yaml:"allowExitCodes"`
	AutomapSubstitutions bool     `yaml:"automapSubstitutions"`
}

// cloudBuildBuiltins are Cloud Build's own substitutions, with stand-ins.
var cloudBuildBuiltins = map[string]string{
	"PROJECT_ID": "my-project", "PROJECT_NUMBER": "123456789", "LOCATION": "us-central1",
	"BUILD_ID": "build-id", "SERVICE_ACCOUNT_EMAIL": "sa@my-project.iam.gserviceaccount.com",
	"SERVICE_ACCOUNT": "sa", "REPO_NAME": "prep", "REPO_FULL_NAME": "prep-dev/prep",
	"BRANCH_NAME": "main", "TAG_NAME": "v0", "REF_NAME": "main", "COMMIT_SHA": "0000000",
	"SHORT_SHA": "0000000", "REVISION_ID": "0000000", "TRIGGER_NAME": "t", "TRIGGER_BUILD_CONFIG_PATH": "deploy/cloudbuild.yaml",
}

var cbVar = regexp.MustCompile(`\$\$|\$\{([A-Za-z0-9_]+)\}|\$([A-Za-z0-9_]+)`)

// substitute applies Cloud Build's substitutions: $_X and ${_X} from the
// file's substitutions, built-ins like $PROJECT_ID, $$ for a literal $. Any
// other $NAME fails the build, as it does in Cloud Build.
func (b *cloudBuild) substitute(s string) (string, error) {
	var err error
	out := cbVar.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := cbVar.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		if strings.HasPrefix(name, "_") {
			if v, ok := b.Substitutions[name]; ok {
				return v
			}
			err = errors.Join(err, fmt.Errorf("%s is not in substitutions", name))
		} else if v, ok := cloudBuildBuiltins[name]; ok {
			return v
		} else {
			err = errors.Join(err, fmt.Errorf("%s is neither a substitution nor a built-in; write $%s for a shell variable", m, m))
		}
		return m
	})
	return out, err
}

func checkCloudBuild(file string, data []byte, img *imageConfig, calls *[]*checkedCall) error {
	var b cloudBuild
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&b); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)))
	}
	stepName := func(i int) string {
		if b.Steps[i].ID != "" {
			return "step " + b.Steps[i].ID
		}
		return fmt.Sprintf("step %d", i)
	}

	// deps[i]: every step that step i waits for, directly or not. A step
	// without waitFor waits for all before it; waitFor: ['-'] for none.
	ids := map[string]int{}
	deps := make([]map[int]bool, len(b.Steps))
	for i, s := range b.Steps {
		deps[i] = map[int]bool{}
		direct := []int{}
		if s.WaitFor == nil {
			for j := range i {
				direct = append(direct, j)
			}
		}
		for _, w := range s.WaitFor {
			if w == "-" {
				continue
			}
			j, ok := ids[w]
			if !ok {
				fail("%s: waitFor %q: no earlier step has that id", stepName(i), w)
				continue
			}
			direct = append(direct, j)
		}
		for _, j := range direct {
			deps[i][j] = true
			for k := range deps[j] {
				deps[i][k] = true
			}
		}
		if s.ID != "" {
			ids[s.ID] = i
		}
	}

	var converts, merges, benches []*checkedCall
	step := map[*checkedCall]int{}
	for i, s := range b.Steps {
		where := stepName(i)
		var serr []error
		sub := func(v string) string {
			out, err := b.substitute(v)
			serr = append(serr, err)
			return out
		}
		name, entry, script := sub(s.Name), sub(s.Entrypoint), sub(s.Script)
		args := make([]string, len(s.Args))
		for j, a := range s.Args {
			args[j] = sub(a)
		}
		env := map[string]string{}
		for _, e := range s.Env {
			k, v, _ := strings.Cut(sub(e), "=")
			env[k] = v
		}
		if err := errors.Join(serr...); err != nil {
			fail("%s: %v", where, err)
			continue
		}
		var found [][]string
		var err error
		switch {
		case script != "":
			found, err = scriptCalls(script, env)
		case entry != "" || isPrepImage(name):
			var ep []string
			if entry != "" {
				ep = []string{entry}
			}
			found, err = extractCalls(img.argv(ep, args), env)
		case mentionsPrep(args):
			err = fmt.Errorf("runs prep in image %s without an entrypoint; cannot tell what runs", name)
		}
		if err == nil && isPrepImage(name) && len(found) == 0 {
			err = errors.New("uses the prep image, but no prep invocation could be read from it")
		}
		if err != nil {
			fail("%s: %v", where, err)
			continue
		}
		for _, argv := range found {
			cc, err := checkCall(prepCall{file: file, where: where, argv: argv, env: env})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			*calls = append(*calls, cc)
			step[cc] = i
			switch cc.cmd.Name() {
			case "convert":
				converts = append(converts, cc)
			case "merge-manifest":
				merges = append(merges, cc)
			case "bench-read":
				benches = append(benches, cc)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // the structure of calls that failed is moot
	}

	// The convert steps: one run split into tasks 0..n-1, all at once.
	if len(converts) == 0 {
		fail("no step runs prep convert")
		return errors.Join(errs...)
	}
	errs = append(errs, checkTasks(file, converts, len(converts))...)
	for _, a := range converts {
		for _, c := range converts {
			if deps[step[a]][step[c]] {
				fail("%s waits for %s: the tasks of one conversion should run in parallel (waitFor: ['-'])", a.where, c.where[len("step "):])
			}
		}
	}
	dst := converts[0].args[1]
	if len(merges) == 0 {
		fail("no step runs prep merge-manifest %s after the convert steps", dst)
	} else {
		errs = append(errs, checkMergeMode(file, converts, merges[0].where)...)
	}
	for _, m := range merges {
		if m.args[0] != dst {
			fail("%s: merges %s, but the convert steps write %s", m.where, m.args[0], dst)
		}
		for _, c := range converts {
			if !deps[step[m]][step[c]] {
				fail("%s does not wait for %s: it would merge before that task has written its manifest", m.where, strings.TrimPrefix(c.where, "step "))
			}
		}
	}
	if len(benches) == 0 {
		fail("no step runs prep bench-read on the merged shards")
	}
	for _, br := range benches {
		if t := br.args[0]; t != dst && !strings.HasPrefix(t, strings.TrimSuffix(dst, "/")+"/") {
			fail("%s: reads %s, not the shards in %s", br.where, t, dst)
		}
		for _, m := range merges {
			if !deps[step[br]][step[m]] {
				fail("%s does not wait for %s: it needs manifest.json", br.where, strings.TrimPrefix(m.where, "step "))
			}
		}
	}
	return errors.Join(errs...)
}

// checkTasks checks that converts are the tasks 0..n-1 of one run, each
// once, and agree on everything but their index.
func checkTasks(file string, converts []*checkedCall, n int) []error {
	var errs []error
	by := map[int]*checkedCall{}
	for _, c := range converts {
		if c.taskCount != n {
			errs = append(errs, fmt.Errorf("%s: %s: runs as task %d of %d (--task-count), but there are %d tasks", c.file, c.where, c.taskIndex, c.taskCount, n))
		}
		if p := converts[0].plan(); c.plan() != p {
			errs = append(errs, fmt.Errorf("%s: %s: the tasks of one run must agree on all but --task-index:\n\t%s\n\t%s (%s)", c.file, c.where, c.plan(), p, converts[0].where))
		}
		if prev, ok := by[c.taskIndex]; ok {
			errs = append(errs, fmt.Errorf("%s: task %d of %d is run by both %s and %s", c.file, c.taskIndex, n, prev.where, c.where))
		}
		by[c.taskIndex] = c
	}
	for i := range n {
		if by[i] == nil {
			errs = append(errs, fmt.Errorf("%s: nothing runs task %d of %d", file, i, n))
		}
	}
	return errs
}

// checkMergeMode checks who writes manifest.json: the step mergeStep,
// which runs merge-manifest after all tasks, or, where there is none
// (mergeStep ""), the last task to finish. Either writes it once.
func checkMergeMode(file string, converts []*checkedCall, mergeStep string) []error {
	for _, c := range converts {
		switch {
		case mergeStep != "" && !c.noMerge():
			return []error{fmt.Errorf("%s: %s: %s merges the manifest parts, so the tasks need --no-merge (or drop that step: the last task to finish merges)", file, c.where, mergeStep)}
		case mergeStep == "" && c.noMerge():
			return []error{fmt.Errorf("%s: %s: --no-merge, but nothing runs prep merge-manifest after the tasks: drop --no-merge, so the last task to finish writes manifest.json", file, c.where)}
		}
	}
	return nil
}

// ---- Cloud Batch ----

// jsonInt reads the int64 fields of Google APIs, which JSON carries as
// strings ("16") or numbers.
type jsonInt struct {
	v   int64
	set bool
}

func (j *jsonInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %s", b)
	}
	*j = jsonInt{v, true}
	return nil
}

type batchEnv struct {
	Variables map[string]string `json:"variables"`
}

type batchJob struct {
	TaskGroups []struct {
		TaskCount   jsonInt `json:"taskCount"`
		Parallelism jsonInt `json:"parallelism"`
		TaskSpec    struct {
			Runnables []struct {
				Container *struct {
					ImageURI   string   `json:"imageUri"`
					Entrypoint string   `json:"entrypoint"`
					Commands   []string `json:"commands"`
				} `json:"container"`
				Script *struct {
					Text string `json:"text"`
				} `json:"script"`
				Environment batchEnv `json:"environment"`
			} `json:"runnables"`
			Environment   batchEnv `json:"environment"`
			MaxRetryCount jsonInt  `json:"maxRetryCount"`
		} `json:"taskSpec"`
	} `json:"taskGroups"`
}

func checkBatch(file string, data []byte, img *imageConfig, calls *[]*checkedCall) error {
	var job batchJob
	if err := json.Unmarshal(data, &job); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)))
	}
	if len(job.TaskGroups) == 0 {
		fail("no taskGroups")
	}
	for g, tg := range job.TaskGroups {
		group := fmt.Sprintf("taskGroups[%d]", g)
		n := int(tg.TaskCount.v)
		if !tg.TaskCount.set {
			n = 1
		}
		if tg.Parallelism.set && tg.Parallelism.v > int64(n) {
			fail("%s: parallelism %d is more than taskCount %d", group, tg.Parallelism.v, n)
		}
		var converts []*checkedCall
		for r, run := range tg.TaskSpec.Runnables {
			where := fmt.Sprintf("%s.runnables[%d]", group, r)
		tasks:
			for task := range n {
				// What Batch gives each task: the job's variables and its own.
				env := map[string]string{}
				for k, v := range tg.TaskSpec.Environment.Variables {
					env[k] = v
				}
				for k, v := range run.Environment.Variables {
					env[k] = v
				}
				env["BATCH_TASK_INDEX"], env["BATCH_TASK_COUNT"] = strconv.Itoa(task), strconv.Itoa(n)
				var found [][]string
				var err error
				switch {
				case run.Script != nil:
					found, err = scriptCalls(run.Script.Text, env)
				case run.Container != nil:
					c := run.Container
					var words []string
					for _, w := range c.Commands {
						x, e := expandVars(w, env)
						err = errors.Join(err, e)
						words = append(words, x)
					}
					var ep []string
					if c.Entrypoint != "" {
						ep = []string{c.Entrypoint}
					}
					if err == nil && (c.Entrypoint != "" || isPrepImage(c.ImageURI)) {
						found, err = extractCalls(img.argv(ep, words), env)
					} else if err == nil && mentionsPrep(words) {
						err = fmt.Errorf("runs prep in image %s without an entrypoint; cannot tell what runs", c.ImageURI)
					}
					if err == nil && isPrepImage(c.ImageURI) && len(found) == 0 {
						err = errors.New("uses the prep image, but no prep invocation could be read from it")
					}
				}
				if err != nil {
					fail("%s: %v", where, err)
					break tasks
				}
				for _, argv := range found {
					cc, err := checkCall(prepCall{file: file, where: fmt.Sprintf("%s task %d", where, task), argv: argv, env: env})
					if err != nil {
						errs = append(errs, err)
						continue tasks // the other tasks would fail alike
					}
					*calls = append(*calls, cc)
					switch {
					case cc.cmd.Name() == "convert":
						converts = append(converts, cc)
						if task == 0 && tg.TaskSpec.MaxRetryCount.v > 0 && !cc.resumes() {
							fail("%s: maxRetryCount %d, but a retried task without --resume (or --overwrite) refuses the shards it left", where, tg.TaskSpec.MaxRetryCount.v)
						}
					case n > 1 && !cc.help:
						fail("%s: prep %s runs once in each of the %d tasks", where, cc.cmd.Name(), n)
					}
				}
			}
		}
		if len(errs) == 0 && len(converts) > 0 {
			errs = append(errs, checkTasks(file, converts, n)...)
			errs = append(errs, checkMergeMode(file, converts, "")...)
		}
	}
	return errors.Join(errs...)
}

// ---- Kubernetes ----

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
}

type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		CompletionMode string `yaml:"completionMode"`
		Completions    *int   `yaml:"completions"`
		Parallelism    *int   `yaml:"parallelism"`
		BackoffLimit   *int   `yaml:"backoffLimit"`
		Template       struct {
			Spec struct {
				RestartPolicy  string         `yaml:"restartPolicy"`
				InitContainers []k8sContainer `yaml:"initContainers"`
				Containers     []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// checkK8s checks the Kubernetes files together: the merge Job must merge
// what the Indexed Job writes.
func checkK8s(names []string, files map[string][]byte, img *imageConfig, calls *[]*checkedCall) error {
	var errs []error
	var converts, merges []*checkedCall
	for _, file := range names {
		fail := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)))
		}
		dec := yaml.NewDecoder(bytes.NewReader(files[file]))
		for doc := 0; ; doc++ {
			var obj k8sObject
			err := dec.Decode(&obj)
			if err == io.EOF {
				break
			}
			if err != nil {
				fail("document %d: %v", doc, err)
				break
			}
			if obj.Kind != "Job" {
				continue
			}
			job := "Job " + obj.Metadata.Name
			spec := obj.Spec
			indexed := spec.CompletionMode == "Indexed"
			n := 1
			if spec.Completions != nil {
				n = *spec.Completions
			} else if indexed {
				fail("%s: an Indexed Job needs completions", job)
			}
			if spec.Parallelism != nil && *spec.Parallelism > n {
				fail("%s: parallelism %d is more than completions %d", job, *spec.Parallelism, n)
			}
			retries := spec.BackoffLimit == nil || *spec.BackoffLimit > 0 // the default is 6
			pod := spec.Template.Spec
			var jobConverts []*checkedCall
			for _, ctr := range slices.Concat(pod.InitContainers, pod.Containers) {
				where := job + " container " + ctr.Name
			indices:
				for index := range n {
					env := map[string]string{}
					if indexed {
						env["JOB_COMPLETION_INDEX"] = strconv.Itoa(index)
					}
					for _, e := range ctr.Env {
						switch {
						case e.ValueFrom == nil:
							env[e.Name] = e.Value
						case e.ValueFrom.FieldRef != nil && strings.Contains(e.ValueFrom.FieldRef.FieldPath, "job-completion-index") && indexed:
							env[e.Name] = strconv.Itoa(index)
						}
					}
					var err error
					expand := func(words []string) []string {
						var out []string
						for _, w := range words {
							x, e := expandVars(w, env)
							err = errors.Join(err, e)
							out = append(out, x)
						}
						return out
					}
					argv := img.argv(expand(ctr.Command), expand(ctr.Args))
					var found [][]string
					if err == nil {
						switch {
						case len(ctr.Command) > 0 || isPrepImage(ctr.Image):
							found, err = extractCalls(argv, env)
						case mentionsPrep(ctr.Args):
							err = fmt.Errorf("runs prep in image %s without a command; cannot tell what runs", ctr.Image)
						}
					}
					if err == nil && isPrepImage(ctr.Image) && len(found) == 0 {
						err = errors.New("uses the prep image, but no prep invocation could be read from it")
					}
					if err != nil {
						fail("%s: %v", where, err)
						break indices
					}
					for _, a := range found {
						w := where
						if indexed {
							w = fmt.Sprintf("%s index %d", where, index)
						}
						cc, err := checkCall(prepCall{file: file, where: w, argv: a, env: env})
						if err != nil {
							errs = append(errs, err)
							break indices // the other indices would fail alike
						}
						*calls = append(*calls, cc)
						switch {
						case cc.cmd.Name() == "convert":
							jobConverts = append(jobConverts, cc)
							if index == 0 && retries && !cc.resumes() {
								fail("%s: a retried pod without --resume (or --overwrite) refuses the shards it left", where)
							}
						case cc.cmd.Name() == "merge-manifest":
							merges = append(merges, cc)
						}
					}
				}
			}
			if len(jobConverts) > 0 {
				if n > 1 && !indexed {
					fail("%s: %d completions of prep convert need completionMode: Indexed, or every pod is task 0", job, n)
				}
				for _, c := range jobConverts {
					if c.taskCount != n {
						fail("%s: runs task %d of %d (--task-count), but the Job has completions %d", c.where, c.taskIndex, c.taskCount, n)
						break
					}
				}
				if len(errs) == 0 {
					errs = append(errs, checkTasks(file, jobConverts, n)...)
				}
				converts = append(converts, jobConverts...)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(converts) == 0 {
		return fmt.Errorf("%s: no Job runs prep convert", strings.Join(names, ", "))
	}
	// Without a merge Job, the last pod to finish merges.
	dst := converts[0].args[1]
	for _, m := range merges {
		if m.args[0] != dst {
			errs = append(errs, fmt.Errorf("%s: %s: merges %s, but %s writes %s", m.file, m.where, m.args[0], converts[0].where, dst))
		}
	}
	mergeStep := ""
	if len(merges) > 0 {
		mergeStep = merges[0].file + ": " + merges[0].where
	}
	errs = append(errs, checkMergeMode(converts[0].file, converts, mergeStep)...)
	return errors.Join(errs...)
}

// ---- Slurm ----

// sbatchOptions are the sbatch options a job script may set, by long name,
// with their short letter ("" if none) and whether they take a value. The
// test refuses any other, as sbatch refuses a misspelt one; add an option
// here when a script needs it.
var sbatchOptions = map[string]struct {
	short    string
	hasValue bool
}{
	"account": {"A", true}, "array": {"a", true}, "chdir": {"D", true}, "comment": {"", true},
	"constraint": {"C", true}, "cpus-per-gpu": {"", true}, "cpus-per-task": {"c", true},
	"dependency": {"d", true}, "error": {"e", true}, "exclusive": {"", false}, "export": {"", true},
	"gpus": {"G", true}, "gpus-per-task": {"", true}, "gres": {"", true}, "job-name": {"J", true},
	"licenses": {"L", true}, "mail-type": {"", true}, "mail-user": {"", true}, "mem": {"", true},
	"mem-per-cpu": {"", true}, "nice": {"", true}, "no-requeue": {"", false}, "nodes": {"N", true},
	"ntasks": {"n", true}, "ntasks-per-node": {"", true}, "open-mode": {"", true},
	"output": {"o", true}, "partition": {"p", true}, "qos": {"q", true}, "requeue": {"", false},
	"reservation": {"", true}, "signal": {"", true}, "time": {"t", true}, "time-min": {"", true},
	"tmp": {"", true},
}

// sbatchDirectives reads the #SBATCH lines of a job script into option ->
// value. sbatch reads them only up to the first command: one after it is
// an error here, since sbatch would silently ignore it.
func sbatchDirectives(script string) (map[string]string, error) {
	short := map[string]string{}
	for long, o := range sbatchOptions {
		if o.short != "" {
			short[o.short] = long
		}
	}
	opts := map[string]string{}
	commands := false
	for n, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#SBATCH") {
			commands = commands || (trimmed != "" && !strings.HasPrefix(trimmed, "#"))
			continue
		}
		if commands {
			return nil, fmt.Errorf("line %d: %q comes after the first command, where sbatch ignores it", n+1, line)
		}
		words := strings.Fields(strings.TrimPrefix(line, "#SBATCH"))
		if i := slices.IndexFunc(words, func(w string) bool { return strings.HasPrefix(w, "#") }); i >= 0 {
			words = words[:i] // a comment after the options
		}
		for i := 0; i < len(words); i++ {
			w := words[i]
			var name, value string
			var inline bool
			switch {
			case strings.HasPrefix(w, "--"):
				name, value, inline = strings.Cut(w[2:], "=")
			case strings.HasPrefix(w, "-") && len(w) >= 2:
				name, value, inline = short[w[1:2]], w[2:], len(w) > 2
				if name == "" {
					return nil, fmt.Errorf("line %d: unknown sbatch option %s", n+1, w)
				}
			default:
				return nil, fmt.Errorf("line %d: %q is not an sbatch option", n+1, w)
			}
			o, ok := sbatchOptions[name]
			switch {
			case !ok:
				return nil, fmt.Errorf("line %d: unknown sbatch option --%s", n+1, name)
			case o.hasValue && !inline:
				if i+1 >= len(words) {
					return nil, fmt.Errorf("line %d: --%s needs a value", n+1, name)
				}
				i++
				value = words[i]
			case !o.hasValue && inline && name != "exclusive":
				return nil, fmt.Errorf("line %d: --%s takes no value", n+1, name)
			}
			opts[name] = value
		}
	}
	return opts, nil
}

// arrayIDs expands an sbatch --array spec ("0-15", "1-16%4", "0-15:2",
// "1,4,9-11") into its task ids, in order.
func arrayIDs(spec string) ([]int, error) {
	spec, _, _ = strings.Cut(spec, "%") // the limit on tasks at once
	var ids []int
	for _, part := range strings.Split(spec, ",") {
		rng, stepStr, hasStep := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		step := 1
		var errS error
		if hasStep {
			step, errS = strconv.Atoi(stepStr)
		}
		if errA != nil || errB != nil || errS != nil || a < 0 || b < a || step < 1 {
			return nil, fmt.Errorf("--array=%s: %q is not a range of task ids", spec, part)
		}
		for id := a; id <= b; id += step {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// checkSlurm checks an sbatch job array script: what each array task runs,
// with the variables Slurm gives it, and that the tasks make one run.
func checkSlurm(file string, data []byte, calls *[]*checkedCall) error {
	script := string(data)
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...))
	}
	opts, err := sbatchDirectives(script)
	if err != nil {
		return fail("%v", err)
	}
	spec, ok := opts["array"]
	if !ok {
		return fail("no #SBATCH --array: every task would be task 0 of 1")
	}
	ids, err := arrayIDs(spec)
	if err != nil {
		return fail("%v", err)
	}
	var errs []error
	var converts []*checkedCall
	_, noRequeue := opts["no-requeue"]
tasks:
	for k, id := range ids {
		// What Slurm sets in each array task that a script may use.
		env := map[string]string{
			"SLURM_ARRAY_TASK_ID":    strconv.Itoa(id),
			"SLURM_ARRAY_TASK_MIN":   strconv.Itoa(ids[0]),
			"SLURM_ARRAY_TASK_MAX":   strconv.Itoa(ids[len(ids)-1]),
			"SLURM_ARRAY_TASK_COUNT": strconv.Itoa(len(ids)),
			"SLURM_ARRAY_JOB_ID":     "4200",
			"SLURM_JOB_ID":           strconv.Itoa(4201 + k),
			"SLURM_SUBMIT_DIR":       "/home/user",
		}
		if c, ok := opts["cpus-per-task"]; ok {
			env["SLURM_CPUS_PER_TASK"] = c
		}
		where := fmt.Sprintf("array task %d", id)
		found, err := scriptCalls(script, env)
		if err == nil && len(found) == 0 {
			err = errors.New("no prep invocation could be read from the script")
		}
		if err != nil {
			errs = append(errs, fail("%s: %v", where, err))
			break
		}
		for _, argv := range found {
			cc, err := checkCall(prepCall{file: file, where: where, argv: argv, env: env})
			if err != nil {
				errs = append(errs, err)
				break tasks // the other tasks would fail alike
			}
			*calls = append(*calls, cc)
			switch {
			case cc.cmd.Name() == "convert":
				converts = append(converts, cc)
				if k == 0 && !noRequeue && !cc.resumes() {
					errs = append(errs, fail("%s: a requeued task (#SBATCH --requeue, or the cluster's default) without --resume (or --overwrite) refuses the shards it left", where))
				}
			case len(ids) > 1 && !cc.help:
				errs = append(errs, fail("%s: prep %s runs once in each of the %d array tasks", where, cc.cmd.Name(), len(ids)))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(converts) == 0 {
		return fail("the script runs no prep convert")
	}
	errs = append(errs, checkTasks(file, converts, len(ids))...)
	errs = append(errs, checkMergeMode(file, converts, "")...)
	return errors.Join(errs...)
}
