package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The AWS Batch array job and the Argo Workflows template are checked as
// deploy_test.go checks the others: every prep invocation each task runs
// goes through the CLI's own parsing, the tasks must cover 0..N-1 of one
// plan, and exactly one step writes manifest.json.

const (
	awsJobFile    = "deploy/aws-batch-job.json"
	awsSubmitFile = "deploy/aws-batch-submit.sh"
	argoFile      = "deploy/argo-workflow.yaml"
)

func readRepoFiles(t *testing.T, names ...string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	return files
}

// ---- AWS Batch ----

// awsJob is the part of an AWS Batch job definition (RegisterJobDefinition
// input) that says what runs.
type awsJob struct {
	JobDefinitionName string `json:"jobDefinitionName"`
	Type              string `json:"type"`
	RetryStrategy     struct {
		Attempts int `json:"attempts"`
	} `json:"retryStrategy"`
	ContainerProperties struct {
		Image       string   `json:"image"`
		Command     []string `json:"command"`
		Environment []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"environment"`
	} `json:"containerProperties"`
}

var (
	arraySize = regexp.MustCompile(`--array-properties\s+size=(\d+)`)
	jobDefRef = regexp.MustCompile(`--job-definition\s+(\S+)`)
)

// checkAWSBatch checks the job definition against the submit script that
// runs it as an array job: each child gets AWS_BATCH_JOB_ARRAY_INDEX.
func checkAWSBatch(files map[string][]byte, img *imageConfig, calls *[]*checkedCall) error {
	var job awsJob
	if err := json.Unmarshal(files[awsJobFile], &job); err != nil {
		return fmt.Errorf("%s: %w", awsJobFile, err)
	}
	submit := string(files[awsSubmitFile])
	var errs []error
	fail := func(file, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...)))
	}
	m := arraySize.FindStringSubmatch(submit)
	if m == nil {
		fail(awsSubmitFile, "submits no array job (--array-properties size=N): one job would convert everything as task 0")
		return errors.Join(errs...)
	}
	n, _ := strconv.Atoi(m[1])
	if d := jobDefRef.FindStringSubmatch(submit); d == nil || d[1] != job.JobDefinitionName {
		fail(awsSubmitFile, "submits job definition %v, but %s registers %q", d, awsJobFile, job.JobDefinitionName)
	}
	if !strings.Contains(submit, "file://"+awsJobFile) {
		fail(awsSubmitFile, "does not register %s", awsJobFile)
	}
	c := job.ContainerProperties
	if job.Type != "container" || !isPrepImage(c.Image) {
		fail(awsJobFile, "type %q, image %q: want a container job on the prep image", job.Type, c.Image)
	}
	var converts []*checkedCall
	for task := range n {
		env := map[string]string{}
		for _, e := range c.Environment {
			env[e.Name] = e.Value
		}
		env["AWS_BATCH_JOB_ARRAY_INDEX"] = strconv.Itoa(task)
		where := fmt.Sprintf("containerProperties.command child %d", task)
		found, err := extractCalls(img.argv(nil, c.Command), env)
		if err == nil && len(found) == 0 {
			err = errors.New("no prep invocation could be read from it")
		}
		if err != nil {
			fail(awsJobFile, "%s: %v", where, err)
			break
		}
		for _, argv := range found {
			cc, err := checkCall(prepCall{file: awsJobFile, where: where, argv: argv, env: env})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			*calls = append(*calls, cc)
			if cc.cmd.Name() == "convert" {
				converts = append(converts, cc)
				if task == 0 && job.RetryStrategy.Attempts > 1 && !cc.resumes() {
					fail(awsJobFile, "retryStrategy.attempts %d, but a retried child without --resume (or --overwrite) refuses the shards it left", job.RetryStrategy.Attempts)
				}
			} else if n > 1 && !cc.help {
				fail(awsJobFile, "%s: prep %s runs once in each of the %d children", where, cc.cmd.Name(), n)
			}
		}
	}
	if len(errs) == 0 && len(converts) > 0 {
		errs = append(errs, checkTasks(awsJobFile, converts, n)...)
		errs = append(errs, checkMergeMode(awsJobFile, converts, "")...)
	}
	return errors.Join(errs...)
}

// ---- Argo Workflows ----

type argoParam struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type argoStep struct {
	Name      string `yaml:"name"`
	Template  string `yaml:"template"`
	Arguments struct {
		Parameters []argoParam `yaml:"parameters"`
	} `yaml:"arguments"`
	WithSequence *struct {
		Count string `yaml:"count"`
	} `yaml:"withSequence"`
	WithItems []any `yaml:"withItems"`
}

type argoTemplate struct {
	Name   string       `yaml:"name"`
	Steps  [][]argoStep `yaml:"steps"`
	Inputs struct {
		Parameters []argoParam `yaml:"parameters"`
	} `yaml:"inputs"`
	RetryStrategy *struct {
		Limit string `yaml:"limit"`
	} `yaml:"retryStrategy"`
	Container *k8sContainer `yaml:"container"`
}

type argoWorkflow struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Entrypoint string `yaml:"entrypoint"`
		Arguments  struct {
			Parameters []argoParam `yaml:"parameters"`
		} `yaml:"arguments"`
		Templates []argoTemplate `yaml:"templates"`
	} `yaml:"spec"`
}

var argoVar = regexp.MustCompile(`\{\{\s*([^}]+?)\s*\}\}`)

// argoExpand replaces {{name}} from vars; one it does not know is an
// error, as Argo would refuse the workflow or pass the text on.
func argoExpand(s string, vars map[string]string) (string, error) {
	var err error
	out := argoVar.ReplaceAllStringFunc(s, func(m string) string {
		name := argoVar.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			err = errors.Join(err, fmt.Errorf("unknown variable {{%s}}", name))
		}
		return v
	})
	return out, err
}

// checkArgo walks the entry template's step groups in order: each step
// runs its template once per item of withSequence, with {{item}} and the
// step's arguments bound; a convert's tasks must cover the sequence, and a
// later group's merge-manifest means the tasks need --no-merge.
func checkArgo(file string, data []byte, img *imageConfig, calls *[]*checkedCall) error {
	var wf argoWorkflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if wf.Kind != "Workflow" && wf.Kind != "WorkflowTemplate" {
		return fmt.Errorf("%s: kind %q, want Workflow or WorkflowTemplate", file, wf.Kind)
	}
	vars := map[string]string{}
	for _, p := range wf.Spec.Arguments.Parameters {
		vars["workflow.parameters."+p.Name] = p.Value
	}
	templates := map[string]argoTemplate{}
	for _, t := range wf.Spec.Templates {
		templates[t.Name] = t
	}
	entry, ok := templates[wf.Spec.Entrypoint]
	if !ok {
		return fmt.Errorf("%s: entrypoint %q names no template", file, wf.Spec.Entrypoint)
	}
	var errs []error
	var converts []*checkedCall
	var converted bool
	mergeStep := ""
	for g, group := range entry.Steps {
		for _, st := range group {
			where := fmt.Sprintf("steps[%d] %s", g, st.Name)
			t, ok := templates[st.Template]
			if !ok || t.Container == nil {
				errs = append(errs, fmt.Errorf("%s: %s: template %q is no container template", file, where, st.Template))
				continue
			}
			items := []string{""}
			if st.WithSequence != nil {
				count, err := argoExpand(st.WithSequence.Count, vars)
				n, cerr := strconv.Atoi(count)
				if err != nil || cerr != nil || n < 1 {
					errs = append(errs, fmt.Errorf("%s: %s: withSequence count %q: %v", file, where, st.WithSequence.Count, errors.Join(err, cerr)))
					continue
				}
				items = items[:0]
				for i := range n {
					items = append(items, strconv.Itoa(i))
				}
			}
			var stepConverts []*checkedCall
			for _, item := range items {
				local := map[string]string{}
				for k, v := range vars {
					local[k] = v
				}
				if st.WithSequence != nil {
					local["item"] = item
				}
				for _, p := range st.Arguments.Parameters {
					v, err := argoExpand(p.Value, local)
					errs = append(errs, err)
					local["inputs.parameters."+p.Name] = v
				}
				for _, p := range t.Inputs.Parameters {
					if _, ok := local["inputs.parameters."+p.Name]; !ok {
						errs = append(errs, fmt.Errorf("%s: %s: template %s takes parameter %s, which the step does not pass", file, where, t.Name, p.Name))
					}
				}
				env := map[string]string{}
				for _, e := range t.Container.Env {
					env[e.Name] = e.Value
				}
				var words []string
				var err error
				for _, w := range t.Container.Args {
					x, e := argoExpand(w, local)
					err = errors.Join(err, e)
					words = append(words, x)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: %v", file, where, err))
					break
				}
				argv := img.argv(t.Container.Command, words)
				if !isPrepImage(t.Container.Image) && len(t.Container.Command) == 0 {
					errs = append(errs, fmt.Errorf("%s: %s: image %s is not prep's and names no command", file, where, t.Container.Image))
					break
				}
				found, err := extractCalls(argv, env)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: %v", file, where, err))
					break
				}
				for _, a := range found {
					w := where
					if st.WithSequence != nil {
						w += " item " + item
					}
					cc, err := checkCall(prepCall{file: file, where: w, argv: a, env: env})
					if err != nil {
						errs = append(errs, err)
						continue
					}
					*calls = append(*calls, cc)
					switch cc.cmd.Name() {
					case "convert":
						stepConverts = append(stepConverts, cc)
						if item == items[0] && t.RetryStrategy != nil && t.RetryStrategy.Limit != "0" && !cc.resumes() {
							errs = append(errs, fmt.Errorf("%s: %s: retryStrategy retries the pod, but without --resume (or --overwrite) a retried task refuses the shards it left", file, where))
						}
					case "merge-manifest":
						if !converted {
							errs = append(errs, fmt.Errorf("%s: %s: merge-manifest runs before any convert step has ended: put it in a later step group", file, where))
						}
						mergeStep = where
					}
				}
			}
			if len(stepConverts) > 0 {
				errs = append(errs, checkTasks(file, stepConverts, len(items))...)
				converts = append(converts, stepConverts...)
			}
		}
		converted = converted || len(converts) > 0
	}
	if len(converts) > 0 {
		errs = append(errs, checkMergeMode(file, converts, mergeStep)...)
	}
	return errors.Join(errs...)
}

func checkAWSAndArgo(files map[string][]byte) ([]*checkedCall, error) {
	var calls []*checkedCall
	img, err := checkDockerfile("Dockerfile", files["Dockerfile"], &calls)
	if err != nil {
		return nil, err
	}
	calls = nil // the Dockerfile's own call is TestDeployConfigs' to count
	err = errors.Join(
		checkAWSBatch(files, img, &calls),
		checkArgo(argoFile, files[argoFile], img, &calls),
	)
	return calls, err
}

func TestDeployAWSBatchArgo(t *testing.T) {
	clearTaskEnv(t)
	files := readRepoFiles(t, "Dockerfile", awsJobFile, awsSubmitFile, argoFile)
	calls, err := checkAWSAndArgo(files)
	if err != nil {
		t.Fatalf("deploy files disagree with the CLI:\n%v", err)
	}
	per := map[string]map[string]int{}
	for _, c := range calls {
		if per[c.file] == nil {
			per[c.file] = map[string]int{}
		}
		per[c.file][c.cmd.Name()]++
		if c.cmd.Name() == "convert" && !strings.HasPrefix(c.args[0], "s3://") {
			t.Errorf("%s: %s reads %s: the AWS examples read s3://", c.file, c.where, c.args[0])
		}
	}
	want := map[string]map[string]int{
		awsJobFile: {"convert": 16},
		argoFile:   {"convert": 8, "merge-manifest": 1},
	}
	for file, w := range want {
		for cmd, n := range w {
			if per[file][cmd] != n {
				t.Errorf("%s: checked %d invocations of prep %s, want %d (all: %v)", file, per[file][cmd], cmd, n, per[file])
			}
		}
	}

	// Broken variants are refused, naming the file and the fault.
	type edit struct{ file, old, new string }
	for _, tc := range []struct {
		name string
		edit edit
		want []string
	}{
		{"array size differs from --task-count", edit{awsSubmitFile, "size=16", "size=8"}, []string{awsJobFile, "runs as task 0 of 16 (--task-count), but there are 8 tasks"}},
		{"no array", edit{awsSubmitFile, "--array-properties size=16", ""}, []string{awsSubmitFile, "submits no array job"}},
		{"no --task-count", edit{awsJobFile, `"--task-count", "16",`, ""}, []string{"AWS_BATCH_JOB_ARRAY_INDEX is set but no task count is"}},
		{"retried without --resume", edit{awsJobFile, `"--resume"`, `"--seed", "7"`}, []string{"retryStrategy.attempts 3"}},
		{"unknown flag", edit{awsJobFile, `"--workers", "8"`, `"--wokers", "8"`}, []string{awsJobFile, "unknown flag: --wokers"}},
		{"wrong definition", edit{awsSubmitFile, "--job-definition prep-convert", "--job-definition other"}, []string{awsSubmitFile, "registers \"prep-convert\""}},
		{"argo count differs", edit{argoFile, `--task-count, "{{workflow.parameters.tasks}}"`, `--task-count, "4"`}, []string{argoFile, "but there are 8 tasks"}},
		{"argo merge and self-merge", edit{argoFile, ", --resume, --no-merge]", ", --resume]"}, []string{argoFile, "need --no-merge"}},
		{"argo unknown variable", edit{argoFile, "{{inputs.parameters.index}}", "{{inputs.parameters.idx}}"}, []string{argoFile, "unknown variable {{inputs.parameters.idx}}"}},
		{"argo merge too early", edit{argoFile, "        - - name: merge\n", "          - name: merge\n"}, []string{argoFile, "before any convert step has ended"}},
		{"argo bad value", edit{argoFile, "--shard-size, 256MiB", "--shard-size, 256Mb"}, []string{argoFile, "--shard-size", `"256Mb"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := readRepoFiles(t, "Dockerfile", awsJobFile, awsSubmitFile, argoFile)
			text := string(files[tc.edit.file])
			if n := strings.Count(text, tc.edit.old); n != 1 {
				t.Fatalf("%s holds %q %d times, not once; update this case to the file", tc.edit.file, tc.edit.old, n)
			}
			files[tc.edit.file] = []byte(strings.Replace(text, tc.edit.old, tc.edit.new, 1))
			_, err := checkAWSAndArgo(files)
			if err == nil {
				t.Fatalf("%s edited %q was accepted", tc.edit.file, tc.edit.old)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}
