"""``ml_metadata.MetadataStoreService``: ML Metadata's read calls answered from millpond's lineage (read-only).

Each call is one query of ``store.lineage_reads``, answered as ML Metadata's own server answers it
(``ml_metadata/metadata_store/metadata_store.cc`` at the vendored commit):

- ids that are not there are left out (``Get*ByID``, events, contexts of a node, parents, children: an empty
  answer), a type, name or context that is not there is an empty answer (``Get*ByType``, ``Get*ByTypeAndName``,
  ``Get*ByContext``), a type asked by name that is not there is NOT_FOUND (``GetArtifactType``...), as MLMD does;
- lists page with ``ListOperationOptions`` where the call takes them (``mlmd.queries``); without options a list
  is whole, as MLMD's;
- ``GetLineageSubgraph`` traces from the starting nodes its filter selects, ``max_num_hops`` (at most 100, the
  default) each way ``direction`` says, and answers as MLMD does: the nodes and contexts reached *dehydrated*
  (their ids: ``Get*ByID`` reads them), the events traversed, their attributions and associations, every type;
  ``read_mask`` picks among those (MLMD fills no ``parent_contexts`` there, nor does this). Not served:
  ``ending_artifacts``/``ending_executions`` (INVALID_ARGUMENT).

Writes (``Put*``) are refused, once the caller is identified, with UNIMPLEMENTED and a message: lineage is recorded
by the runs themselves (and KFP's artifact API), never by an MLMD client; so are the reads not listed above (by
external id, the deprecated ``GetLineageGraph``). Bad input is INVALID_ARGUMENT with a message, never a crash; the
caller is identified and limited to the namespaces it may read by ``mlmd.callers``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection
from typing import Any, Literal, TypeVar

import grpc

from millpond.errors import MillpondError, NotFoundError, UserError
from millpond.mlmd import convert
from millpond.mlmd.callers import Caller, Callers, Unauthenticated
from millpond.mlmd.proto import metadata_store_pb2 as mlmd
from millpond.mlmd.proto import metadata_store_service_pb2 as api
from millpond.mlmd.proto import metadata_store_service_pb2_grpc as service
from millpond.mlmd.queries import MAX_SIZE, list_request, next_page_token, parse_filter
from millpond.store.lineage_reads import Condition, Kind, LineageReads, NodeQuery, PageRequest

log = logging.getLogger(__name__)

MAX_IDS = 10_000  # ids in one request: more is INVALID_ARGUMENT (each is a bound parameter of one query)
MAX_HOPS = 100  # MLMD's kQueryLineageSubgraphMaxNumHops: the default, and the most a subgraph traces
_WHOLE = PageRequest(2**62)  # a list without options: every row, as MLMD's
_GRAPH_PATHS = tuple(field.name for field in mlmd.LineageGraph.DESCRIPTOR.fields)  # parent_contexts: none, as MLMD
Handler = TypeVar("Handler", bound=Callable[..., Any])


def served(method: Handler) -> Handler:
    """An RPC: the caller identified (``mlmd.callers``), then ``method(self, request, caller)``; what it raises
    becomes a status with a message (an unexpected error INTERNAL, logged with its traceback)."""

    @functools.wraps(method)
    def call(self: MetadataStore, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            metadata = {key.lower(): value for key, value in context.invocation_metadata()
                        if isinstance(value, str)}
            return method(self, request, self.callers.identify(metadata, context.peer()))
        except Unauthenticated as exc:
            code = grpc.StatusCode.UNAUTHENTICATED if exc.status == 401 else grpc.StatusCode.PERMISSION_DENIED
            message = str(exc)
        except NotServed as exc:
            code, message = grpc.StatusCode.UNIMPLEMENTED, str(exc)
        except NotFoundError as exc:
            code, message = grpc.StatusCode.NOT_FOUND, str(exc)
        except UserError as exc:
            code, message = grpc.StatusCode.INVALID_ARGUMENT, str(exc)
        except Exception:
            log.exception("ML Metadata call %s failed", method.__name__)
            code, message = grpc.StatusCode.INTERNAL, f"{method.__name__} failed: see the server's log"
        context.abort(code, message)

    return call  # type: ignore[return-value]  # the same signature as gRPC's servicer method


def _ids(values: Collection[int], what: str) -> list[int]:
    if len(values) > MAX_IDS:
        raise UserError(f"too many {what}: {len(values)} (at most {MAX_IDS} in one request)")
    return list(dict.fromkeys(values))


class MetadataStore(service.MetadataStoreServiceServicer):
    """The servicer: one method per RPC served (``served``), the rest refused (``_refuse_the_rest``)."""

    def __init__(self, reads: LineageReads, callers: Callers) -> None:
        self.reads = reads
        self.callers = callers

    # --- types --------------------------------------------------------------------------------------------
    def _types(self, kind: Kind) -> list[str]:
        return convert.type_names(kind, self.reads.type_names(kind))

    def _type(self, kind: Kind, name: str, version: str) -> Any:
        if version or name not in self._types(kind):
            raise NotFoundError(f"No type found for query, name: `{name}`, version: `{version or 'nullopt'}`")
        return convert.type_message(kind, name)

    def _types_by_id(self, kind: Kind, ids: Collection[int]) -> list[Any]:
        wanted = set(_ids(ids, "type_ids"))
        return [convert.type_message(kind, name) for name in self._types(kind)
                if convert.type_id(kind, name) in wanted]

    @served
    def GetArtifactType(self, request: api.GetArtifactTypeRequest, caller: Caller) -> api.GetArtifactTypeResponse:
        return api.GetArtifactTypeResponse(artifact_type=self._type("artifact", request.type_name,
                                                                    request.type_version))

    @served
    def GetExecutionType(self, request: api.GetExecutionTypeRequest, caller: Caller) -> api.GetExecutionTypeResponse:
        return api.GetExecutionTypeResponse(execution_type=self._type("execution", request.type_name,
                                                                      request.type_version))

    @served
    def GetContextType(self, request: api.GetContextTypeRequest, caller: Caller) -> api.GetContextTypeResponse:
        return api.GetContextTypeResponse(context_type=self._type("context", request.type_name, request.type_version))

    @served
    def GetArtifactTypes(self, request: api.GetArtifactTypesRequest, caller: Caller) -> api.GetArtifactTypesResponse:
        return api.GetArtifactTypesResponse(artifact_types=[convert.type_message("artifact", name)
                                                            for name in self._types("artifact")])

    @served
    def GetExecutionTypes(self, request: api.GetExecutionTypesRequest,
                          caller: Caller) -> api.GetExecutionTypesResponse:
        return api.GetExecutionTypesResponse(execution_types=[convert.type_message("execution", name)
                                                              for name in self._types("execution")])

    @served
    def GetContextTypes(self, request: api.GetContextTypesRequest, caller: Caller) -> api.GetContextTypesResponse:
        return api.GetContextTypesResponse(context_types=[convert.type_message("context", name)
                                                          for name in self._types("context")])

    @served
    def GetArtifactTypesByID(self, request: api.GetArtifactTypesByIDRequest,
                             caller: Caller) -> api.GetArtifactTypesByIDResponse:
        return api.GetArtifactTypesByIDResponse(artifact_types=self._types_by_id("artifact", request.type_ids))

    @served
    def GetExecutionTypesByID(self, request: api.GetExecutionTypesByIDRequest,
                              caller: Caller) -> api.GetExecutionTypesByIDResponse:
        return api.GetExecutionTypesByIDResponse(execution_types=self._types_by_id("execution", request.type_ids))

    @served
    def GetContextTypesByID(self, request: api.GetContextTypesByIDRequest,
                            caller: Caller) -> api.GetContextTypesByIDResponse:
        return api.GetContextTypesByIDResponse(context_types=self._types_by_id("context", request.type_ids))

    # --- nodes: lists -------------------------------------------------------------------------------------
    def _list(self, kind: Kind, request: Any, caller: Caller, **query: Any) -> tuple[list[Any], str]:
        """A list call's nodes (as messages) and next page token: paged when the request has options."""
        namespaces = caller.namespaces(kind)
        if not request.HasField("options"):
            found = self.reads.page(kind, NodeQuery(namespaces=namespaces, **query), _WHOLE)
            return [convert.node(kind, row) for row in found.nodes], ""
        asked = list_request(kind, request.options)
        conditions = (*query.pop("conditions", ()), *asked.conditions)
        found = self.reads.page(kind, NodeQuery(conditions, namespaces=namespaces, **query), asked.page)
        return [convert.node(kind, row) for row in found.nodes], next_page_token(asked, found.next_offset)

    def _by_type(self, kind: Kind, request: Any, caller: Caller) -> tuple[list[Any], str]:
        if request.type_version or request.type_name not in self._types(kind):
            return [], ""  # MLMD: an unknown type has no nodes
        return self._list(kind, request, caller, conditions=(Condition("type", "=", (request.type_name,)),))

    @served
    def GetArtifacts(self, request: api.GetArtifactsRequest, caller: Caller) -> api.GetArtifactsResponse:
        nodes, token = self._list("artifact", request, caller)
        return api.GetArtifactsResponse(artifacts=nodes, next_page_token=token)

    @served
    def GetExecutions(self, request: api.GetExecutionsRequest, caller: Caller) -> api.GetExecutionsResponse:
        nodes, token = self._list("execution", request, caller)
        return api.GetExecutionsResponse(executions=nodes, next_page_token=token)

    @served
    def GetContexts(self, request: api.GetContextsRequest, caller: Caller) -> api.GetContextsResponse:
        nodes, token = self._list("context", request, caller)
        return api.GetContextsResponse(contexts=nodes, next_page_token=token)

    @served
    def GetArtifactsByType(self, request: api.GetArtifactsByTypeRequest,
                           caller: Caller) -> api.GetArtifactsByTypeResponse:
        nodes, token = self._by_type("artifact", request, caller)
        return api.GetArtifactsByTypeResponse(artifacts=nodes, next_page_token=token)

    @served
    def GetExecutionsByType(self, request: api.GetExecutionsByTypeRequest,
                            caller: Caller) -> api.GetExecutionsByTypeResponse:
        nodes, token = self._by_type("execution", request, caller)
        return api.GetExecutionsByTypeResponse(executions=nodes, next_page_token=token)

    @served
    def GetContextsByType(self, request: api.GetContextsByTypeRequest, caller: Caller) -> api.GetContextsByTypeResponse:
        nodes, token = self._by_type("context", request, caller)
        return api.GetContextsByTypeResponse(contexts=nodes, next_page_token=token)

    @served
    def GetArtifactsByContext(self, request: api.GetArtifactsByContextRequest,
                              caller: Caller) -> api.GetArtifactsByContextResponse:
        nodes, token = self._list("artifact", request, caller, context=request.context_id)
        return api.GetArtifactsByContextResponse(artifacts=nodes, next_page_token=token)

    @served
    def GetExecutionsByContext(self, request: api.GetExecutionsByContextRequest,
                               caller: Caller) -> api.GetExecutionsByContextResponse:
        nodes, token = self._list("execution", request, caller, context=request.context_id)
        return api.GetExecutionsByContextResponse(executions=nodes, next_page_token=token)

    # --- nodes: by id, name, URI --------------------------------------------------------------------------
    def _by_ids(self, kind: Kind, ids: Collection[int], caller: Caller) -> list[Any]:
        rows = self.reads.by_ids(kind, _ids(ids, f"{kind}_ids"), caller.namespaces(kind))
        return [convert.node(kind, row) for row in rows]

    def _by_name(self, kind: Kind, type_name: str, version: str, name: str, caller: Caller) -> Any:
        """The node of this type and name, or None. Names here are unique per run, not per type as MLMD's: of
        several, the newest is the one."""
        if version:
            return None
        query = NodeQuery((Condition("type", "=", (type_name,)), Condition("name", "=", (name,))),
                          namespaces=caller.namespaces(kind))
        found = self.reads.page(kind, query, PageRequest(1, order="create_time", ascending=False)).nodes
        return convert.node(kind, found[0]) if found else None

    @served
    def GetArtifactsByID(self, request: api.GetArtifactsByIDRequest, caller: Caller) -> api.GetArtifactsByIDResponse:
        artifacts = self._by_ids("artifact", request.artifact_ids, caller)
        types = []
        if request.populate_artifact_types:
            types = [convert.type_message("artifact", name) for name in dict.fromkeys(a.type for a in artifacts)]
        return api.GetArtifactsByIDResponse(artifacts=artifacts, artifact_types=types)

    @served
    def GetExecutionsByID(self, request: api.GetExecutionsByIDRequest,
                          caller: Caller) -> api.GetExecutionsByIDResponse:
        return api.GetExecutionsByIDResponse(executions=self._by_ids("execution", request.execution_ids, caller))

    @served
    def GetContextsByID(self, request: api.GetContextsByIDRequest, caller: Caller) -> api.GetContextsByIDResponse:
        return api.GetContextsByIDResponse(contexts=self._by_ids("context", request.context_ids, caller))

    @served
    def GetArtifactByTypeAndName(self, request: api.GetArtifactByTypeAndNameRequest,
                                 caller: Caller) -> api.GetArtifactByTypeAndNameResponse:
        found = self._by_name("artifact", request.type_name, request.type_version, request.artifact_name, caller)
        return api.GetArtifactByTypeAndNameResponse(artifact=found)

    @served
    def GetExecutionByTypeAndName(self, request: api.GetExecutionByTypeAndNameRequest,
                                  caller: Caller) -> api.GetExecutionByTypeAndNameResponse:
        found = self._by_name("execution", request.type_name, request.type_version, request.execution_name, caller)
        return api.GetExecutionByTypeAndNameResponse(execution=found)

    @served
    def GetContextByTypeAndName(self, request: api.GetContextByTypeAndNameRequest,
                                caller: Caller) -> api.GetContextByTypeAndNameResponse:
        found = self._by_name("context", request.type_name, request.type_version, request.context_name, caller)
        return api.GetContextByTypeAndNameResponse(context=found)

    @served
    def GetArtifactsByURI(self, request: api.GetArtifactsByURIRequest,
                          caller: Caller) -> api.GetArtifactsByURIResponse:
        uris = _ids(request.uris, "uris")  # type: ignore[arg-type]  # text, counted and deduplicated as ids are
        if not uris:
            return api.GetArtifactsByURIResponse()
        query = NodeQuery((Condition("uri", "IN", tuple(uris)),), namespaces=caller.namespaces("artifact"))
        rows = self.reads.page("artifact", query, _WHOLE).nodes
        return api.GetArtifactsByURIResponse(artifacts=[convert.artifact(row) for row in rows])

    # --- events and contexts of nodes -----------------------------------------------------------------------
    @served
    def GetEventsByExecutionIDs(self, request: api.GetEventsByExecutionIDsRequest,
                                caller: Caller) -> api.GetEventsByExecutionIDsResponse:
        rows = self.reads.events(executions=_ids(request.execution_ids, "execution_ids"),
                                 namespaces=caller.run_namespaces)
        return api.GetEventsByExecutionIDsResponse(events=[convert.event(row) for row in rows])

    @served
    def GetEventsByArtifactIDs(self, request: api.GetEventsByArtifactIDsRequest,
                               caller: Caller) -> api.GetEventsByArtifactIDsResponse:
        visible = {row.mlmd_id for row in self.reads.by_ids("artifact", _ids(request.artifact_ids, "artifact_ids"),
                                                             caller.artifact_namespaces)}
        rows = self.reads.events(artifacts=visible, namespaces=caller.run_namespaces)
        return api.GetEventsByArtifactIDsResponse(events=[convert.event(row) for row in rows])

    def _contexts(self, caller: Caller, **query: Any) -> list[mlmd.Context]:
        rows = self.reads.page("context", NodeQuery(namespaces=caller.run_namespaces, **query), _WHOLE).nodes
        return [convert.context(row) for row in rows]

    @served
    def GetContextsByArtifact(self, request: api.GetContextsByArtifactRequest,
                              caller: Caller) -> api.GetContextsByArtifactResponse:
        if not self.reads.by_ids("artifact", [request.artifact_id], caller.artifact_namespaces):
            return api.GetContextsByArtifactResponse()
        return api.GetContextsByArtifactResponse(contexts=self._contexts(caller, of_artifact=request.artifact_id))

    @served
    def GetContextsByExecution(self, request: api.GetContextsByExecutionRequest,
                               caller: Caller) -> api.GetContextsByExecutionResponse:
        if not self.reads.by_ids("execution", [request.execution_id], caller.run_namespaces):
            return api.GetContextsByExecutionResponse()
        return api.GetContextsByExecutionResponse(contexts=self._contexts(caller, of_execution=request.execution_id))

    @served
    def GetParentContextsByContext(self, request: api.GetParentContextsByContextRequest,
                                   caller: Caller) -> api.GetParentContextsByContextResponse:
        return api.GetParentContextsByContextResponse(contexts=self._contexts(caller, parent_of=request.context_id))

    @served
    def GetChildrenContextsByContext(self, request: api.GetChildrenContextsByContextRequest,
                                     caller: Caller) -> api.GetChildrenContextsByContextResponse:
        return api.GetChildrenContextsByContextResponse(contexts=self._contexts(caller, child_of=request.context_id))

    def _related(self, context_ids: Collection[int], caller: Caller, relation: str) -> dict[int, list[Any]]:
        """Each context's parents (``relation`` ``parent_of``) or children (``child_of``), those that have any."""
        related = {context_id: self._contexts(caller, **{relation: context_id})
                   for context_id in _ids(context_ids, "context_ids")}
        return {context_id: found for context_id, found in related.items() if found}

    @served
    def GetParentContextsByContexts(self, request: api.GetParentContextsByContextsRequest,
                                    caller: Caller) -> api.GetParentContextsByContextsResponse:
        response = api.GetParentContextsByContextsResponse()
        for context_id, parents in self._related(request.context_ids, caller, "parent_of").items():
            response.contexts[context_id].parent_contexts.extend(parents)
        return response

    @served
    def GetChildrenContextsByContexts(self, request: api.GetChildrenContextsByContextsRequest,
                                      caller: Caller) -> api.GetChildrenContextsByContextsResponse:
        response = api.GetChildrenContextsByContextsResponse()
        for context_id, children in self._related(request.context_ids, caller, "child_of").items():
            response.contexts[context_id].children_contexts.extend(children)
        return response

    # --- lineage subgraph -----------------------------------------------------------------------------------
    @served
    def GetLineageSubgraph(self, request: api.GetLineageSubgraphRequest,
                           caller: Caller) -> api.GetLineageSubgraphResponse:
        options = request.lineage_subgraph_query_options
        paths = list(request.read_mask.paths) or list(_GRAPH_PATHS)  # as MLMD: other paths are ignored
        start = options.WhichOneof("starting_nodes")
        if start is None:
            raise UserError("Missing arguments for listing starting nodes.")
        if options.HasField("ending_artifacts") or options.HasField("ending_executions"):
            raise UserError("ending_artifacts and ending_executions are not supported by this server")
        kind: Literal["artifact", "execution"] = "artifact" if start == "starting_artifacts" else "execution"
        text = getattr(options, start).filter_query
        if not text:
            raise UserError("Cannot list starting nodes if `filter_query` is unspecified.")
        hops = options.max_num_hops if options.HasField("max_num_hops") else MAX_HOPS
        if hops < 0:
            raise UserError(f"max_num_hops cannot be negative: max_num_hops = {hops}")
        direction = mlmd.LineageSubgraphQueryOptions.Direction.Name(options.direction)
        starting = self.reads.all(kind, NodeQuery(parse_filter(kind, text), namespaces=caller.namespaces(kind)),
                                  MAX_SIZE)
        if not starting:
            raise NotFoundError("Cannot find qualified nodes to start the traversal.")
        tracer = _Tracer(self.reads, caller, direction)
        graph = tracer.trace(kind, [row.mlmd_id for row in starting], min(hops, MAX_HOPS))
        return api.GetLineageSubgraphResponse(lineage_subgraph=self._graph(graph, set(paths), caller))

    def _graph(self, traced: _Traced, paths: set[str], caller: Caller) -> mlmd.LineageGraph:
        graph = mlmd.LineageGraph()
        if "artifacts" in paths:
            graph.artifacts.extend(mlmd.Artifact(id=node) for node in sorted(traced.artifacts))
        if "executions" in paths:
            graph.executions.extend(mlmd.Execution(id=node) for node in sorted(traced.executions))
        attributions = self.reads.links("artifact", traced.artifacts, caller.run_namespaces)
        associations = self.reads.links("execution", traced.executions, caller.run_namespaces)
        if "contexts" in paths:
            contexts = {link.context_mlmd_id for link in (*attributions, *associations)}
            graph.contexts.extend(mlmd.Context(id=node) for node in sorted(contexts))
        if "events" in paths:
            graph.events.extend(convert.event(row) for row in traced.events)
        if "attributions" in paths:
            graph.attributions.extend(convert.attribution(link) for link in attributions)
        if "associations" in paths:
            graph.associations.extend(convert.association(link) for link in associations)
        kinds: tuple[tuple[Kind, str], ...] = (("artifact", "artifact_types"), ("execution", "execution_types"),
                                               ("context", "context_types"))
        for kind, field in kinds:
            if field in paths:
                getattr(graph, field).extend(convert.type_message(kind, name) for name in self._types(kind))
        return graph


class _Traced:
    """What a trace reached: nodes by MLMD id, and the events it followed (each once)."""

    def __init__(self) -> None:
        self.artifacts: set[int] = set()
        self.executions: set[int] = set()
        self.events: list[Any] = []
        self._seen: set[str] = set()

    def follow(self, row: Any) -> None:
        if row.event.id not in self._seen:
            self._seen.add(row.event.id)
            self.events.append(row)


class _Tracer:
    """MLMD's traversal (``QueryLineageSubgraph``): from the starting nodes, one hop at a time, artifacts to
    executions and back. Downstream follows an artifact's INPUT events (who read it) and an execution's OUTPUT
    events (what it wrote); upstream the other two; both, all four. Nodes of namespaces the caller may not read
    are not reached, nor through."""

    def __init__(self, reads: LineageReads, caller: Caller, direction: str) -> None:
        self.reads, self.caller = reads, caller
        self.down = direction in ("DOWNSTREAM", "BIDIRECTIONAL", "DIRECTION_UNSPECIFIED")
        self.up = direction in ("UPSTREAM", "BIDIRECTIONAL", "DIRECTION_UNSPECIFIED")

    def trace(self, kind: Literal["artifact", "execution"], starting: list[int], hops: int) -> _Traced:
        traced = _Traced()
        (traced.artifacts if kind == "artifact" else traced.executions).update(starting)
        frontier, from_artifacts = set(starting), kind == "artifact"
        for _ in range(hops):
            frontier = self._hop(traced, frontier, from_artifacts)
            if not frontier:
                break
            from_artifacts = not from_artifacts
        return traced

    def _hop(self, traced: _Traced, frontier: set[int], from_artifacts: bool) -> set[int]:
        if from_artifacts:
            rows = self.reads.events(artifacts=frontier, namespaces=self.caller.run_namespaces)
            wanted = {"INPUT"} if not self.up else {"OUTPUT"} if not self.down else {"INPUT", "OUTPUT"}
            rows = [row for row in rows if row.event.type in wanted]
            reached = {row.execution_mlmd_id for row in rows}  # events are already of readable runs only
            seen = traced.executions
        else:
            rows = self.reads.events(executions=frontier, namespaces=self.caller.run_namespaces)
            wanted = {"OUTPUT"} if not self.up else {"INPUT"} if not self.down else {"INPUT", "OUTPUT"}
            rows = [row for row in rows if row.event.type in wanted]
            readable = {row.mlmd_id for row in self.reads.by_ids(
                "artifact", {row.artifact_mlmd_id for row in rows}, self.caller.artifact_namespaces)}
            rows = [row for row in rows if row.artifact_mlmd_id in readable]
            reached = {row.artifact_mlmd_id for row in rows}
            seen = traced.artifacts
        for row in rows:
            traced.follow(row)
        new = reached - seen
        seen.update(new)
        return new


class NotServed(MillpondError):
    """A call this endpoint does not answer: UNIMPLEMENTED, with why."""


def _refusal(name: str) -> Callable[..., Any]:
    """The method of an RPC not served: the caller is identified first (so nothing is answered without an
    identity, a refusal neither), then refused."""
    if name.startswith("Put"):
        message = (f"{name}: this ML Metadata endpoint is read-only: millpond records lineage itself as each "
                   "run's tasks end (and through KFP's artifact API, /apis/v2beta1/artifacts)")
    else:
        message = f"{name} is not served by millpond's ML Metadata endpoint (docs/guides/lineage.md lists what is)"

    def refuse(self: MetadataStore, request: Any, caller: Caller) -> Any:
        raise NotServed(message)

    refuse.__name__ = name
    return served(refuse)


def _refuse_the_rest() -> None:
    """Every RPC of the service this class does not serve answers UNIMPLEMENTED with a message of its own."""
    for method in api.DESCRIPTOR.services_by_name["MetadataStoreService"].methods:
        if method.name not in MetadataStore.__dict__:
            setattr(MetadataStore, method.name, _refusal(method.name))


_refuse_the_rest()
