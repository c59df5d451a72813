// npm run image [-- <tag>]: builds the container image (default plant-store:latest) with no registry:
// a base from scratch with the repository's Node 24, then the Containerfile on it with production
// node_modules installed here (test/harness/container.ts). Needs podman or buildah.
import { buildImage, containerEngine, IMAGE_USER } from '../test/harness/container.ts';

const tag = process.argv[2] ?? 'plant-store:latest';
const engine = containerEngine();
if (!engine) {
  process.stderr.write('image: needs podman or buildah, and neither is installed (apt-get install podman)\n');
  process.exit(1);
}
console.log(`image: building ${tag} offline with ${engine.version}`);
const started = performance.now();
try {
  await buildImage(engine, tag, (line) => console.log(`image: ${line}`));
} catch (error) {
  process.stderr.write(`image: ${(error as Error).message}\n`);
  process.exit(1);
}
console.log(`image: ${tag} built in ${((performance.now() - started) / 1000).toFixed(1)} s; it runs as uid ${IMAGE_USER} with its data in the volume /data:`);
console.log(`  podman run -p 3000:3000 -v plant-store-data:/data ${tag}`);
