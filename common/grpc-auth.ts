// The client side of the per-call cluster-secret header on gRPC (common/cluster-secret.ts): an
// interceptor that adds x-kvstore-auth, signed for "POST" and the call's full method path, to
// every call's metadata, and the server side's check of it. Used wherever this project calls or
// serves a gRPC service of its own.
import * as grpc from '@grpc/grpc-js';
import { AUTH_HEADER, clientSecret, signCall, verifyCall, type NonceCache } from './cluster-secret.js';

/** An interceptor signing every call with `secret`. */
export function authInterceptor(secret: Buffer): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set(AUTH_HEADER, signCall(secret, 'POST', options.method_definition.path));
        next(metadata, listener);
      },
    });
}

/** Client options carrying the interceptor for `secret` (default: STORE_CLUSTER_SECRET_FILE's; none without it). */
export function grpcAuthOptions(secret: Buffer | undefined = clientSecret()): grpc.ClientOptions {
  return secret === undefined ? {} : { interceptors: [authInterceptor(secret)] };
}

/** The refusal of a call without a valid x-kvstore-auth entry, or undefined when it has one. */
export function grpcAuthProblem(secret: Buffer, cache: NonceCache, metadata: grpc.Metadata, path: string): string | undefined {
  const v = metadata.get(AUTH_HEADER);
  return verifyCall(secret, cache, typeof v[0] === 'string' ? v[0] : undefined, 'POST', path, undefined);
}
