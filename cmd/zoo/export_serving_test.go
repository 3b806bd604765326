package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	zooroot "github.com/zoo-dev/zoo"

	"google.golang.org/protobuf/encoding/prototext"
	"gopkg.in/yaml.v3"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/cliargs"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/export"
	"github.com/zoo-dev/zoo/serve/tritonpb"
)

// TestExportTriton writes a Triton model repository and parses its config.pbtxt with
// Triton's own model_config.proto (tritonpb; unknown fields are errors); the model.onnx
// beside it imports with the inputs and outputs the config states.
func TestExportTriton(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := zoo(t, "export", "vanilla.tiny", "--triton", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	text, err := os.ReadFile(filepath.Join(dir, "vanilla.tiny", "config.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg tritonpb.ModelConfig
	if err := (prototext.UnmarshalOptions{}).Unmarshal(text, &cfg); err != nil {
		t.Fatalf("config.pbtxt: %v\n%s", err, text)
	}
	if cfg.Name != "vanilla.tiny" || cfg.Platform != "onnxruntime_onnx" || cfg.Backend != "onnxruntime" || cfg.MaxBatchSize != export.TritonMaxBatch ||
		cfg.GetDynamicBatching().GetMaxQueueDelayMicroseconds() != uint64(export.TritonDelay.Microseconds()) {
		t.Errorf("config %v", &cfg)
	}
	if g := cfg.InstanceGroup; len(g) != 1 || g[0].Kind != tritonpb.ModelInstanceGroup_KIND_CPU || g[0].Count != 1 {
		t.Errorf("instance_group %v, want one KIND_CPU instance", g)
	}
	m, err := zooroot.Load(context.Background(), filepath.Join(dir, "vanilla.tiny", "1", "model.onnx"), zooroot.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, in := range cfg.Input {
		got = append(got, fmt.Sprintf("%s %s %v", in.Name, in.DataType, in.Dims))
	}
	for _, o := range cfg.Output {
		got = append(got, fmt.Sprintf("%s %s %v", o.Name, o.DataType, o.Dims))
	}
	for _, vs := range [][]string{{"tokens TYPE_INT64 [-1]", "key_padding_mask TYPE_BOOL [-1]"}, {"hidden TYPE_FP32 [-1 64]", "logits TYPE_FP32 [-1 257]"}} {
		want = append(want, vs...)
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("config tensors %q, want %q", got, want)
	}
	if len(m.Graph().Inputs) != len(cfg.Input) || len(m.Graph().Outputs) != len(cfg.Output) || m.Graph().Inputs[0].Name != cfg.Input[0].Name {
		t.Errorf("model.onnx inputs %v outputs %v against the config", m.Graph().Inputs, m.Graph().Outputs)
	}
}

// The KServe fields zoo writes, as KServe's CRDs name them; decoding with KnownFields makes
// any other field an error.
type k8sMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
}

type servingRuntime struct {
	k8sMeta `yaml:",inline"`
	Spec    struct {
		SupportedModelFormats []struct {
			Name       string `yaml:"name"`
			Version    string `yaml:"version"`
			AutoSelect bool   `yaml:"autoSelect"`
		} `yaml:"supportedModelFormats"`
		ProtocolVersions []string `yaml:"protocolVersions"`
		MultiModel       bool     `yaml:"multiModel"`
		Containers       []struct {
			Name  string   `yaml:"name"`
			Image string   `yaml:"image"`
			Args  []string `yaml:"args"`
			Ports []struct {
				ContainerPort int    `yaml:"containerPort"`
				Protocol      string `yaml:"protocol"`
			} `yaml:"ports"`
			ReadinessProbe probe `yaml:"readinessProbe"`
			LivenessProbe  probe `yaml:"livenessProbe"`
		} `yaml:"containers"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"httpGet"`
}

type inferenceService struct {
	k8sMeta `yaml:",inline"`
	Spec    struct {
		Predictor struct {
			Model struct {
				ModelFormat struct {
					Name string `yaml:"name"`
				} `yaml:"modelFormat"`
				Runtime         string `yaml:"runtime"`
				ProtocolVersion string `yaml:"protocolVersion"`
				StorageURI      string `yaml:"storageUri"`
			} `yaml:"model"`
		} `yaml:"predictor"`
	} `yaml:"spec"`
}

func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
}

// TestExportKServe writes a KServe deployment of trained weights and checks its manifests
// field by field (the runtime runs `zoo serve` with flags zoo serve has, the probes hit its
// health endpoints, the Dockerfile puts the exported model where the runtime serves it
// from), then runs the runtime's command locally on the exported model: it answers with the
// trained weights' numbers, not the seed's.
func TestExportKServe(t *testing.T) {
	dir := t.TempDir()
	trained := filepath.Join(dir, "trained.safetensors")
	// Seed 7's weights stand for trained ones: any weights other than the default seed's.
	if code, _, stderr := zoo(t, "export", "vanilla.tiny", "--seed", "7", "--weights", trained); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	deploy := filepath.Join(dir, "deploy")
	if code, _, stderr := zoo(t, "export", "vanilla.tiny", "--from-weights", trained, "--kserve", deploy); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rt servingRuntime
	decodeStrict(t, filepath.Join(deploy, "servingruntime.yaml"), &rt)
	if rt.APIVersion != "serving.kserve.io/v1alpha1" || rt.Kind != "ServingRuntime" || rt.Metadata.Name != "zoo-vanilla-tiny" || len(rt.Spec.Containers) != 1 ||
		rt.Spec.SupportedModelFormats[0].Name != "zoo" || strings.Join(rt.Spec.ProtocolVersions, ",") != "v2,grpc-v2" {
		t.Fatalf("ServingRuntime %+v", rt)
	}
	ctr := rt.Spec.Containers[0]
	if ctr.Name != "kserve-container" || ctr.Image != "zoo-vanilla-tiny:latest" || ctr.Ports[0].ContainerPort != 8080 ||
		ctr.ReadinessProbe.HTTPGet.Path != "/v2/health/ready" || ctr.LivenessProbe.HTTPGet.Path != "/v2/health/live" {
		t.Errorf("container %+v", ctr)
	}
	args := ctr.Args
	if len(args) < 2 || args[0] != "serve" || args[1] != "/mnt/models/model.onnx" {
		t.Fatalf("args %v", args)
	}
	for _, a := range args[2:] {
		if strings.HasPrefix(a, "--") && !cliargs.DefinesFlag(serveCommand(), strings.TrimPrefix(a, "--")) {
			t.Errorf("args: zoo serve has no flag %s", a)
		}
	}
	for file, want := range map[string][3]string{"inferenceservice.yaml": {"vanilla-tiny", "zoo", "zoo-vanilla-tiny"},
		"inferenceservice-triton.yaml": {"vanilla-tiny-triton", "onnx", "kserve-tritonserver"}} {
		var is inferenceService
		decodeStrict(t, filepath.Join(deploy, file), &is)
		m := is.Spec.Predictor.Model
		if is.APIVersion != "serving.kserve.io/v1beta1" || is.Kind != "InferenceService" || is.Metadata.Name != want[0] ||
			m.ModelFormat.Name != want[1] || m.Runtime != want[2] || m.ProtocolVersion != "v2" {
			t.Errorf("%s: %+v", file, is)
		}
	}
	docker, err := os.ReadFile(filepath.Join(deploy, "Dockerfile"))
	if err != nil || !bytes.Contains(docker, []byte("go build")) || !bytes.Contains(docker, []byte("./cmd/zoo")) || !bytes.Contains(docker, []byte("ENTRYPOINT")) ||
		!bytes.Contains(docker, []byte("COPY --from=model . /mnt/models/")) {
		t.Errorf("Dockerfile: %v\n%s", err, docker)
	}

	// The runtime's command, run here: /mnt/models is the image's copy of deploy/model (the
	// Dockerfile's COPY), and the addresses are free local ports.
	var local []string
	for i := 1; i < len(args); i++ {
		switch {
		case args[i] == "--addr" || args[i] == "--grpc-addr":
			i++
		default:
			local = append(local, strings.Replace(args[i], "/mnt/models", filepath.Join(deploy, "model"), 1))
		}
	}
	p := startServe(t, local...)
	text := "the deployment serves the weights that were exported"
	want := zooRun(t, "vanilla.tiny", text, "--weights", trained, "--pool", "mean", "--normalize").Outputs["embedding"].Data
	seed := zooRun(t, "vanilla.tiny", text, "--pool", "mean", "--normalize").Outputs["embedding"].Data
	code, body := httpDo(t, "POST", p.url+"/v1/embeddings", fmt.Sprintf(`{"model":"vanilla.tiny","input":%q}`, text))
	var r struct {
		Data []struct{ Embedding []float32 }
	}
	if err := json.Unmarshal(body, &r); code != 200 || err != nil || len(r.Data) != 1 {
		t.Fatalf("the deployment's /v1/embeddings: %d %.300s", code, body)
	}
	if err := near(r.Data[0].Embedding, want, 1e-5); err != nil {
		t.Errorf("the deployment against zoo run --weights trained: %v", err)
	}
	if near(r.Data[0].Embedding, seed, 1e-3) == nil {
		t.Errorf("the deployment answers the seed's random weights")
	}
	for _, path := range []string{"/v2/health/ready", "/v2/health/live"} {
		if code, _ := httpDo(t, "GET", p.url+path, ""); code != 200 {
			t.Errorf("probe %s: %d", path, code)
		}
	}
}
