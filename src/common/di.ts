/**
 * Nest's two dependency-injection decorators, imported from their own modules rather than the
 * `@nestjs/common` index. The index loads all of Nest's common layer (rxjs included), which costs
 * about 0.3 s; the services that the admin CLI builds by hand use these instead, so that a CLI
 * command does not pay for a framework it never starts. Nest sees the same decorators either way.
 */
export { Injectable } from '@nestjs/common/decorators/core/injectable.decorator';
export { Inject } from '@nestjs/common/decorators/core/inject.decorator';
