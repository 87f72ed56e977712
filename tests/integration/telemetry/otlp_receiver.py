"""An OTLP/HTTP receiver for the tests: decodes each POST to /v1/traces and /v1/metrics with
the real protobuf classes of `opentelemetry-proto` and writes one JSON line per span, and one
per metric data point (`"signal": "metric"`), to standard output; each raw body is appended to the file named by the first argument, so a test can
look for bytes that must never leave the host. Prints `listening PORT` first."""

import http.server
import json
import sys
import threading

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

RAW = open(sys.argv[1], "ab")
# Several exporters may post at once (one thread each): one line, one body at a time.
OUT = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def value_of(point):
    kind = point.WhichOneof("value")
    return getattr(point, kind) if kind else None


def attributes(items):
    return {a.key: value(a.value) for a in items}


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/traces":
            request, answer = ExportTraceServiceRequest(), ExportTraceServiceResponse()
            show = self.print_spans
        elif self.path == "/v1/metrics":
            request, answer = ExportMetricsServiceRequest(), ExportMetricsServiceResponse()
            show = self.print_metrics
        else:
            self.send_response(404)
            self.end_headers()
            return
        request.ParseFromString(body)
        with OUT:
            RAW.write(body)
            RAW.flush()
            show(request)
        answer = answer.SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def print_spans(self, request):
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    line = {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "status": span.status.code,
                        "status_message": span.status.message,
                        "attributes": attributes(span.attributes),
                        "events": [
                            {"name": e.name, "attributes": attributes(e.attributes)}
                            for e in span.events
                        ],
                        "service": resource.get("service.name"),
                        # The request's own `x-` headers (OTEL_EXPORTER_OTLP_HEADERS).
                        "x_headers": {
                            k.lower(): v
                            for k, v in self.headers.items()
                            if k.lower().startswith("x-")
                        },
                    }
                    print(json.dumps(line), flush=True)

    def print_metrics(self, request):
        # One marker line per export, so a test can count them.
        print(json.dumps({"signal": "metric", "name": "(export)"}), flush=True)
        for resource_metrics in request.resource_metrics:
            resource = attributes(resource_metrics.resource.attributes)
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data")
                    data = getattr(metric, kind)
                    for point in data.data_points:
                        line = {
                            "signal": "metric",
                            "name": metric.name,
                            "unit": metric.unit,
                            "type": kind,
                            "monotonic": getattr(data, "is_monotonic", False),
                            "temporality": getattr(data, "aggregation_temporality", 0),
                            "attributes": attributes(point.attributes),
                            "service": resource.get("service.name"),
                        }
                        if kind == "histogram":
                            line["count"] = point.count
                            line["sum"] = point.sum
                            line["bounds"] = list(point.explicit_bounds)
                            line["bucket_counts"] = list(point.bucket_counts)
                        else:
                            line["value"] = value_of(point)
                        print(json.dumps(line), flush=True)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
