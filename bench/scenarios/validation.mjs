// The ingest validator micro-benchmark, and the class-validator baseline.
import { rng } from '../lib/events.mjs';
import { benchDtoValidator, benchValidator, loadDtoValidator, loadValidator } from '../lib/validation.mjs';
import { PLAN, log, check } from '../lib/common.mjs';

/** The event validator and, for comparison, the class-validator DTOs, on one core. */
export async function validationPhase(dist, results) {
  const validator = await loadValidator(dist);
  if (validator) {
    results.validation = benchValidator(validator, PLAN.validationEvents, rng(42));
    check(
      'validator: rejects exactly the invalid events',
      results.validation.mismatches === 0,
      `${results.validation.mismatches} events judged differently from their construction`,
    );
    log(`validator: ${Math.round(results.validation.eventsPerSec)} events/s on one core`);
  } else {
    check('validator: found in dist/src/ingest', false, 'no event validator export found');
  }
  const dto = loadDtoValidator(dist);
  if (dto && results.validation) {
    results.validation.classValidatorBaseline = benchDtoValidator(dto, PLAN.validationEvents / 10, rng(42));
    log(
      `class-validator DTOs: ${Math.round(results.validation.classValidatorBaseline.eventsPerSec)} events/s on one core`,
    );
  }
}
