#!/usr/bin/env python3
"""Checks apollo's exports with each format's own ecosystem's validator, without network.

    validate.py FORMAT PATH [FORMAT PATH ...]   (each pair checked in turn, one process)

    validate.py otlp-json FILE      opentelemetry-proto: google.protobuf.json_format.Parse of
                                    each line (the collector's otlpjsonfile receiver reads a
                                    message a line) into TracesData (rejects unknown fields and
                                    wrong types), then
                                    the hex ids OTLP/JSON prescribes (trace 32, span 16 digits)
    validate.py prov-json FILE      prov: ProvDocument.deserialize(format='json'), then every
                                    relation names records of the document
    validate.py openlineage FILE    openlineage-python: each line rebuilt with the
                                    openlineage.client event and facet classes (their
                                    validators check runId UUIDs, eventTime, schemaURL,
                                    _producer), and serialized back equal to the line
    validate.py ro-crate DIR        roc-validator: the Provenance Run Crate 0.5 profile (and
                                    those it inherits), REQUIRED level, offline; the RO-Crate
                                    JSON-LD context served from ro-crate-context.jsonld here
                                    (RO-Crate 1.1.0, from the `rocrate` 0.7.0 wheel on PyPI)

Exit 0 when valid; otherwise what is wrong on stderr and exit 1.
"""

import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent


def fail(message):
    print(f"invalid: {message}", file=sys.stderr)
    sys.stderr.flush()
    sys.exit(1)


def otlp_json(path):
    from google.protobuf import json_format
    from opentelemetry.proto.trace.v1 import trace_pb2

    # The collector's otlpjsonfile receiver reads one message a line.
    lines = [line for line in pathlib.Path(path).read_text().splitlines() if line.strip()]
    spans = []
    for line in lines:
        json_format.Parse(line, trace_pb2.TracesData())
        document = json.loads(line)
        spans += [
            span
            for resource in document["resourceSpans"]
            for scope in resource["scopeSpans"]
            for span in scope["spans"]
        ]
    if not spans:
        fail("no spans")
    ids = set()
    for span in spans:
        if not re.fullmatch(r"[0-9a-f]{32}", span["traceId"]):
            fail(f"trace id {span['traceId']!r} is not 32 hex digits")
        for key in ("spanId", "parentSpanId"):
            if key in span and not re.fullmatch(r"[0-9a-f]{16}", span[key]):
                fail(f"{key} {span[key]!r} is not 16 hex digits")
        ids.add(span["spanId"])
        if int(span["endTimeUnixNano"]) < int(span["startTimeUnixNano"]):
            fail(f"span {span['name']} ends before it starts")
    for span in spans:
        if span.get("parentSpanId") and span["parentSpanId"] not in ids:
            fail(f"span {span['name']}'s parent is not in the trace")
    print(f"otlp-json: {len(spans)} spans valid")


def prov_json(path):
    from prov.model import ProvDocument

    document = ProvDocument.deserialize(source=path, format="json")
    records = document.get_records()
    if not records:
        fail("no records")
    ids = {str(record.identifier) for record in records if record.identifier is not None}
    for record in records:
        if record.is_relation():
            for _, value in record.formal_attributes[:2]:
                if value is not None and str(value) not in ids:
                    fail(f"{record.get_type()} names {value}, not in the document")
    print(f"prov-json: {len(records)} records valid")


def pruned(value):
    """`value` without empty objects and lists (at any depth)."""
    if isinstance(value, dict):
        value = {key: pruned(item) for key, item in value.items()}
        return {key: item for key, item in value.items() if item not in ({}, [])}
    if isinstance(value, list):
        return [pruned(item) for item in value]
    return value


def openlineage(path):
    from openlineage.client import event_v2, facet_v2
    from openlineage.client.facet_v2 import (
        dataset_version_dataset,
        error_message_run,
        job_type_job,
        output_statistics_output_dataset,
        parent_run,
        processing_engine_run,
    )
    from openlineage.client.serde import Serde

    def without_meta(fields):
        return {key: value for key, value in fields.items() if not key.startswith("_")}

    run_facets = {
        "parent": lambda f: parent_run.ParentRunFacet(
            run=parent_run.Run(**f["run"]), job=parent_run.Job(**f["job"])
        ),
        "errorMessage": lambda f: error_message_run.ErrorMessageRunFacet(**without_meta(f)),
        "processing_engine": lambda f: processing_engine_run.ProcessingEngineRunFacet(
            **without_meta(f)
        ),
    }
    job_facets = {"jobType": lambda f: job_type_job.JobTypeJobFacet(**without_meta(f))}
    dataset_facets = {
        "version": lambda f: dataset_version_dataset.DatasetVersionDatasetFacet(**without_meta(f)),
    }
    output_facets = {
        "outputStatistics": lambda f: output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            **without_meta(f)
        ),
    }

    def facets(known, given):
        unknown = set(given) - set(known)
        if unknown:
            fail(f"facets this validator does not know: {sorted(unknown)}")
        return {name: known[name](fields) for name, fields in given.items()}

    lines = pathlib.Path(path).read_text().splitlines()
    if not lines:
        fail("no events")
    for number, line in enumerate(lines, 1):
        given = json.loads(line)
        facet_v2.set_producer(given["producer"])
        inputs = [
            event_v2.InputDataset(
                namespace=d["namespace"], name=d["name"], facets=facets(dataset_facets, d["facets"])
            )
            for d in given["inputs"]
        ]
        outputs = []
        for d in given["outputs"]:
            plain = {k: v for k, v in d["facets"].items() if k in dataset_facets}
            extra = {k: v for k, v in d["facets"].items() if k not in dataset_facets}
            outputs.append(
                event_v2.OutputDataset(
                    namespace=d["namespace"],
                    name=d["name"],
                    facets=facets(dataset_facets, plain),
                    outputFacets=facets(output_facets, extra),
                )
            )
        event = event_v2.RunEvent(
            eventType=event_v2.RunState[given["eventType"]],
            eventTime=given["eventTime"],
            run=event_v2.Run(runId=given["run"]["runId"], facets=facets(run_facets, given["run"]["facets"])),
            job=event_v2.Job(
                namespace=given["job"]["namespace"],
                name=given["job"]["name"],
                facets=facets(job_facets, given["job"]["facets"]),
            ),
            producer=given["producer"],
            inputs=inputs,
            outputs=outputs,
        )
        rebuilt = json.loads(Serde.to_json(event))
        # openlineage-python puts output facets under `outputFacets`; apollo writes the
        # statistics among the dataset's facets, where the spec allows any facet.
        for d in rebuilt.get("outputs", []):
            d.setdefault("facets", {}).update(d.pop("outputFacets", {}))
        # It leaves out empty lists and writes empty facet maps: neither carries anything.
        rebuilt, given = pruned(rebuilt), pruned(given)
        if rebuilt != given:
            fail(f"line {number} does not read back the same:\n{json.dumps(given)}\n{json.dumps(rebuilt)}")
        if given["schemaURL"] != event.schemaURL:
            fail(f"line {number}: schemaURL {given['schemaURL']} is not {event.schemaURL}")
    print(f"openlineage: {len(lines)} events valid")


def ro_crate(path):
    from rocrate_validator import services
    from rocrate_validator.models import ValidationSettings
    from rocrate_validator.utils import http

    contexts = {
        "https://w3id.org/ro/crate/1.1/context": HERE / "ro-crate-context.jsonld",
    }

    class Served:
        """A response from the vendored files: tests have no network."""

        def __init__(self, url):
            local = contexts.get(url.rstrip("/"))
            self.status_code = 200 if local else 404
            self.text = local.read_text() if local else ""
            self.content = self.text.encode()
            self.headers = {"Content-Type": "application/ld+json"}
            self.url = url

        def json(self):
            return json.loads(self.text)

    http.HttpRequester.get = lambda self, url, *args, **kwargs: Served(url)
    http.HttpRequester.head = lambda self, url, *args, **kwargs: Served(url)
    settings = ValidationSettings(
        rocrate_uri=str(pathlib.Path(path).resolve()),
        profile_identifier="provenance-run-crate-0.5",
        requirement_severity="REQUIRED",
        offline=True,
    )
    result = services.validate(settings)
    if not result.passed():
        for issue in result.get_issues():
            print(f"  {issue.severity.name} {issue.check.identifier}: {issue.message}", file=sys.stderr)
        fail("the RO-Crate does not conform to the Provenance Run Crate profile")
    print("ro-crate: conforms to provenance-run-crate-0.5")


def main():
    pairs = sys.argv[1:]
    if not pairs or len(pairs) % 2:
        fail("usage: validate.py FORMAT PATH [FORMAT PATH ...]")
    checks = {
        "otlp-json": otlp_json,
        "prov-json": prov_json,
        "openlineage": openlineage,
        "ro-crate": ro_crate,
    }
    for format_name, path in zip(pairs[::2], pairs[1::2]):
        checks[format_name](path)


if __name__ == "__main__":
    main()
