package serve

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// TensorSpec is one input or output of an exported model as a serving config states it:
// its name, its Triton data type (TYPE_INT64, TYPE_BOOL, TYPE_FP32, ...) and its axes after
// the batch axis, -1 where dynamic.
type TensorSpec struct {
	Name     string
	DataType string
	Dims     []int64
}

// TritonConfig returns a Triton config.pbtxt for an ONNX model served as name: the ONNX
// Runtime backend, the batch axis under max_batch_size, dynamic batching that waits at most
// delay, and the inputs and outputs.
func TritonConfig(name string, maxBatch int, delay time.Duration, inputs, outputs []TensorSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %q\nplatform: \"onnxruntime_onnx\"\nbackend: \"onnxruntime\"\nmax_batch_size: %d\n", name, maxBatch)
	tensors := func(field string, ts []TensorSpec) {
		fmt.Fprintf(&b, "%s [\n", field)
		for i, t := range ts {
			dims := make([]string, len(t.Dims))
			for k, d := range t.Dims {
				dims[k] = fmt.Sprint(d)
			}
			sep := ","
			if i == len(ts)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "  {\n    name: %q\n    data_type: %s\n    dims: [ %s ]\n  }%s\n", t.Name, t.DataType, strings.Join(dims, ", "), sep)
		}
		b.WriteString("]\n")
	}
	tensors("input", inputs)
	tensors("output", outputs)
	fmt.Fprintf(&b, "dynamic_batching {\n  max_queue_delay_microseconds: %d\n}\n", delay.Microseconds())
	b.WriteString("instance_group [\n  {\n    kind: KIND_CPU\n    count: 1\n  }\n]\n")
	return b.String()
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// K8sName returns name as a Kubernetes object name (lower case, dashes; RFC 1123).
func K8sName(name string) string {
	s := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if s == "" {
		s = "model"
	}
	return s
}

// KServeFiles returns the files of a KServe deployment of model (a `zoo serve` argument)
// by their names: a ServingRuntime that runs `zoo serve` from image, an InferenceService on
// it, an InferenceService for Triton's runtime on the model repository at storageURI, and a
// Dockerfile that builds the image from zoo's source tree.
func KServeFiles(model, image, storageURI string) map[string]string {
	n := K8sName(model)
	runtime := fmt.Sprintf(`apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: zoo
spec:
  supportedModelFormats:
    - name: zoo
      version: "1"
      autoSelect: true
  protocolVersions:
    - v2
    - grpc-v2
  multiModel: false
  containers:
    - name: kserve-container
      image: %s
      args:
        - serve
        - %s
        - --addr
        - 0.0.0.0:8080
        - --grpc-addr
        - 0.0.0.0:8081
      ports:
        - containerPort: 8080
          protocol: TCP
      readinessProbe:
        httpGet:
          path: /v2/health/ready
          port: 8080
      livenessProbe:
        httpGet:
          path: /v2/health/live
          port: 8080
`, image, model)
	isvc := fmt.Sprintf(`apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: %s
spec:
  predictor:
    model:
      modelFormat:
        name: zoo
      runtime: zoo
      protocolVersion: v2
`, n)
	triton := fmt.Sprintf(`apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: %s-triton
spec:
  predictor:
    model:
      modelFormat:
        name: onnx
      runtime: kserve-tritonserver
      protocolVersion: v2
      storageUri: %s
`, n, storageURI)
	docker := `# Builds zoo from its source tree (docker build -t zoo:latest .) for the zoo ServingRuntime.
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
RUN go build -trimpath -o /out/zoo ./cmd/zoo

FROM debian:12-slim
COPY --from=build /out/zoo /usr/local/bin/zoo
USER 65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/zoo"]
`
	return map[string]string{"servingruntime.yaml": runtime, "inferenceservice.yaml": isvc, "inferenceservice-triton.yaml": triton, "Dockerfile": docker}
}
