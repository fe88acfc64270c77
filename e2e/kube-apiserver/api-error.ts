// API errors of the test Kubernetes API server: each carries the HTTP code, the `reason` and the
// `details` that the real kube-apiserver puts in its `Status` body, so clients react to them as
// they would against a real cluster (409 Conflict, 404 NotFound, 422 Invalid, 410 Expired...).

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
}

/** The `Status` object (meta/v1) that the API server returns for failures. */
export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message: string;
  reason: string;
  details?: StatusDetails;
  code: number;
}

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
  ) {
    super(message);
  }

  toStatus(): StatusBody {
    const body: StatusBody = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.details) body.details = this.details;
    return body;
  }
}

/** `group` is '' for the core group; the real server names resources `plural.group`. */
function qualified(resource: string, group: string): string {
  return group ? `${resource}.${group}` : resource;
}

export function notFound(resource: string, group: string, name: string): ApiError {
  return new ApiError(404, 'NotFound', `${qualified(resource, group)} "${name}" not found`, {
    name,
    group: group || undefined,
    kind: resource,
  });
}

export function alreadyExists(resource: string, group: string, name: string): ApiError {
  return new ApiError(409, 'AlreadyExists', `${qualified(resource, group)} "${name}" already exists`, {
    name,
    group: group || undefined,
    kind: resource,
  });
}

export function conflict(resource: string, group: string, name: string): ApiError {
  return new ApiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualified(resource, group)} "${name}": ` + 'the object has been modified; please apply your changes to the latest version and try again',
    { name, group: group || undefined, kind: resource },
  );
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, 'BadRequest', message);
}

export function methodNotAllowed(message: string): ApiError {
  return new ApiError(405, 'MethodNotAllowed', message);
}

export function unsupportedMediaType(contentType: string): ApiError {
  return new ApiError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got ${contentType}`,
  );
}

export function gone(message: string): ApiError {
  return new ApiError(410, 'Expired', message);
}

/** 422 with one cause per field error, formatted like the real server's aggregate message. */
export function invalid(kind: string, group: string, name: string, causes: StatusCause[]): ApiError {
  const parts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const joined = parts.length === 1 ? parts[0] : `[${parts.join(', ')}]`;
  return new ApiError(422, 'Invalid', `${kind}${group ? `.${group}` : ''} "${name}" is invalid: ${joined}`, {
    name,
    group: group || undefined,
    kind,
    causes,
  });
}
