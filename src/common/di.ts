/**
 * Nest's two dependency-injection decorators, imported from their own modules rather than the
 * `@nestjs/common` index, which loads all of Nest's common layer (rxjs included). Nest sees the
 * same decorators either way. The admin CLI now builds its services in a Nest application context,
 * which loads that index anyway, so these no longer save a CLI command any time.
 */
export { Injectable } from '@nestjs/common/decorators/core/injectable.decorator';
export { Inject } from '@nestjs/common/decorators/core/inject.decorator';
