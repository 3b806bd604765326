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

// KServeModelDir is where a KServe deployment's image holds the exported model (its ONNX
// file, model.onnx, and its tokenizer), and KServeModel the file zoo serve is run on.
const (
	KServeModelDir = "/mnt/models"
	KServeModel    = KServeModelDir + "/model.onnx"
)

// KServeFiles returns the files of a KServe deployment of the model served as name, by
// their names: a ServingRuntime that runs `zoo serve KServeModel --name NAME` from image, an
// InferenceService on it, an InferenceService for Triton's runtime on the model repository
// at storageURI, and a Dockerfile that builds the image from zoo's source tree with the
// exported model inside it, at KServeModelDir (the build context "model": the directory the
// model was exported into). The deployment so serves the weights that were exported.
func KServeFiles(name, image, storageURI string) map[string]string {
	n := K8sName(name)
	runtime := fmt.Sprintf(`apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: zoo-%s
spec:
  supportedModelFormats:
    - name: zoo
      version: "1"
      autoSelect: false
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
        - --name
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
`, n, image, KServeModel, name)
	isvc := fmt.Sprintf(`apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: %s
spec:
  predictor:
    model:
      modelFormat:
        name: zoo
      runtime: zoo-%s
      protocolVersion: v2
`, n, n)
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
	docker := fmt.Sprintf(`# syntax=docker/dockerfile:1.4
# The image of the zoo-%[1]s ServingRuntime: zoo built from its source tree, and the exported
# model (the directory model/ beside this file: model.onnx with its weights, and its tokenizer)
# inside the image at %[2]s. Build it from zoo's source tree, naming this folder's model/:
#   docker buildx build -t %[3]s -f DIR/Dockerfile --build-context model=DIR/model .
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
RUN go build -trimpath -o /out/zoo ./cmd/zoo

FROM debian:12-slim
COPY --from=build /out/zoo /usr/local/bin/zoo
COPY --from=model . %[2]s/
USER 65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/zoo"]
`, n, KServeModelDir, image)
	return map[string]string{"servingruntime.yaml": runtime, "inferenceservice.yaml": isvc, "inferenceservice-triton.yaml": triton, "Dockerfile": docker}
}
