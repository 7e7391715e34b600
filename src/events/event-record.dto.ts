// The record moved to common/reads, where the quarantine's records extend it.
export { EventRecordDto } from '@app/common/reads/event-record.dto';
